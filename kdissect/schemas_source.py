"""Where record schemas come from (docs/guide/values.md): files (``--schemas DIR``, per-topic
``--value-schema``/``--key-schema``) and a Confluent-compatible Schema Registry
(``--registry URL``) with an on-disk cache, so a capture can be read again offline.

This module does the I/O and the parsing (fastavro for Avro, protobuf/protoc for
Protobuf); the decoders in kdissect/protocol/values_schema get parsed ``Schema``s.
"""

from __future__ import annotations

import base64
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from .bounded import InputError, load_json, read_file, read_json
from .protocol.values_schema import Schema, avro, protobuf

MAX_SCHEMA = 16 << 20  # bytes of one schema file or registry answer
# a registry answer: each read within READ_TIMEOUT s, the whole of it within DEADLINE s
# (a server trickling a byte at a time never trips a per-read timeout)
READ_TIMEOUT = 10.0
DEADLINE = 30.0

SUFFIXES = (".avsc", ".proto", ".json", ".desc")


class SchemaError(Exception):
    """A schema that cannot be read or parsed, or a registry that cannot be reached:
    the message says which and what to do."""


def _needs(module: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise SchemaError(
            f"reading record schemas needs {module.split('.')[0]}: pip install 'kdissect[values]'"
        ) from None


def parse_schema(
    text: str, kind: str, label: str = "", references: dict[str, str] | None = None
) -> Schema:
    """A schema from its text: kind avro, protobuf (.proto text) or json; ``references``
    maps the names of referenced schemas (Protobuf imports, Avro schemas defining named
    types) to their text."""
    if kind == "avro":
        _needs("fastavro")
        try:
            doc = load_json(text, label or "Avro schema")
            refs = [load_json(t, label or "Avro schema") for t in (references or {}).values()]
        except InputError as e:
            raise SchemaError(str(e)) from None
        try:
            parsed = avro.parse(doc, refs)
        except ValueError as e:
            raise SchemaError(f"{label or 'Avro schema'}: {e}") from None
        top = parsed[0]
        name = (
            top.get("name", top.get("type"))
            if isinstance(top, dict)
            else ("union" if isinstance(top, list) else top)
        )
        return Schema("avro", parsed, _label(str(name), label))
    if kind == "protobuf":
        fds = compile_proto(text, references or {}, label)
        ps = protobuf.from_file_set(fds, main="main.proto")
        return Schema("protobuf", ps, _label(ps.top[0].lstrip(".") if ps.top else "", label))
    if kind == "json":
        try:
            doc = load_json(text, label or "JSON Schema")
        except InputError as e:
            raise SchemaError(str(e)) from None
        title = doc.get("title", "") if isinstance(doc, dict) else ""
        return Schema("json", doc, _label(title, label))
    raise SchemaError(f"unknown schema type {kind!r} (AVRO, PROTOBUF and JSON are known)")


def _label(name: str, where: str) -> str:
    return f"{name} ({where})" if name and where else name or where


def compile_proto(text: str, references: dict[str, str], label: str) -> Any:
    """.proto text to a FileDescriptorSet with protoc (grpcio-tools), imports included."""
    _needs("grpc_tools")
    descriptor_pb2 = _needs("google.protobuf.descriptor_pb2")
    import grpc_tools

    include = Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory(prefix="kdissect-proto-") as tmp:
        root = Path(tmp)
        for name, body in {**references, "main.proto": text}.items():
            target = (root / name).resolve()
            if root.resolve() not in target.parents:
                raise SchemaError(f"{label}: import path {name!r} leaves the schema's directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        out = root / "out.desc"
        # protoc in its own process: grpc_tools.protoc.main prints to our stderr
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{root}",
                f"-I{include}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                "main.proto",
            ],
            capture_output=True,
            text=True,
            cwd=root,
        )
        if run.returncode != 0 or not out.exists():
            why = run.stderr.strip().replace(str(root) + "/", "")
            raise SchemaError(f"{label or '.proto'}: protoc cannot compile it: {why}")
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(out.read_bytes())
        return fds


def load_file(path: Path) -> Schema:
    """A schema file: .avsc, .proto (imports from its directory), .json, .desc."""
    label = path.name
    try:
        if path.suffix == ".desc":
            descriptor_pb2 = _needs("google.protobuf.descriptor_pb2")
            fds = descriptor_pb2.FileDescriptorSet()
            try:
                fds.ParseFromString(read_file(path, MAX_SCHEMA, "schema"))
            except InputError:
                raise
            except Exception as e:  # protobuf's DecodeError
                raise SchemaError(f"{path}: not a FileDescriptorSet ({e})") from None
            ps = protobuf.from_file_set(fds)
            return Schema("protobuf", ps, ps.top[0].lstrip(".") if ps.top else label)
        text = _read_text(path)
    except InputError as e:
        raise SchemaError(str(e)) from None
    kind = {".avsc": "avro", ".proto": "protobuf", ".json": "json"}.get(path.suffix)
    if kind is None:
        raise SchemaError(f"{path}: schema files end in {', '.join(SUFFIXES)}")
    refs = {}
    if kind == "protobuf":  # its directory's .proto files may be imported
        try:
            refs = {p.name: _read_text(p) for p in path.parent.glob("*.proto") if p != path}
        except InputError as e:
            raise SchemaError(str(e)) from None
    try:
        return parse_schema(text, kind, label, refs)
    except SchemaError as e:
        # named types defined by other files of the directory (unknown type otherwise)
        if kind != "avro" or "nknown type" not in str(e):
            raise
        try:
            refs = {p.name: _read_text(p) for p in path.parent.glob("*.avsc") if p != path}
        except InputError as err:
            raise SchemaError(str(err)) from None
        return parse_schema(text, kind, label, refs)


def _read_text(path: Path) -> str:
    try:
        return read_file(path, MAX_SCHEMA, "schema").decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"cannot read schema {path}: not UTF-8 text ({e})") from None


class Schemas:
    """The schema source the decoders query: per-topic overrides, then files named by
    schema id in a directory, then a registry."""

    def __init__(
        self,
        directory: Path | None = None,
        registry: Registry | None = None,
        overrides: dict[tuple[str, str], Schema] | None = None,
    ):
        self.directory = directory
        self.registry = registry
        self.overrides = overrides or {}
        # values are expected to carry Schema Registry framing (else value_unknown_magic)
        self.framed = directory is not None or registry is not None
        self._by_id: dict[int, Schema | None] = {}
        self.problems: list[str] = []  # schemas that failed to load (said once each)

    def for_topic(self, topic: str | None, role: str) -> Schema | None:
        return self.overrides.get((topic or "", role)) if self.overrides else None

    def by_id(self, schema_id: int) -> Schema | None:
        if schema_id in self._by_id:
            return self._by_id[schema_id]
        found = None
        try:
            if self.directory is not None:
                for suffix in SUFFIXES:
                    p = self.directory / f"{schema_id}{suffix}"
                    if p.exists():
                        found = load_file(p)
                        break
            if found is None and self.registry is not None:
                found = self.registry.schema(schema_id)
        except SchemaError as e:
            self.problems.append(str(e))
            print(f"kdissect: {e}", file=sys.stderr)
        self._by_id[schema_id] = found
        return found


class Registry:
    """A Confluent-compatible Schema Registry (Confluent, Apicurio's /apis/ccompat/v7,
    Redpanda, Karapace): ``GET /schemas/ids/ID``, cached on disk under ``cache``.
    Credentials come from --registry-user/--registry-password or the URL's userinfo
    (``https://user:pass@host``), are never printed and never follow a redirect to
    another host; an answer is read within ``deadline`` seconds and MAX_SCHEMA bytes."""

    def __init__(
        self,
        url: str,
        cache: Path | None,
        user: str | None = None,
        password: str | None = None,
        cafile: str | None = None,
        insecure: bool = False,
        timeout: float | None = None,
        deadline: float | None = None,
    ):
        parts = urllib.parse.urlsplit(url.rstrip("/"))
        if parts.username is not None and user is None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
        host = parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        self.url = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        self.cache = cache
        self.timeout = READ_TIMEOUT if timeout is None else timeout
        self.deadline = DEADLINE if deadline is None else deadline
        self.headers = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if user is not None:
            token = base64.b64encode(f"{user}:{password or ''}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        # kept as settings: an SSLContext does not pickle (jsonl workers get the options)
        self.cafile, self.insecure = cafile, insecure
        self.offline = False  # unreachable: only the cache answers

    def _cache_file(self, what: str) -> Path | None:
        if self.cache is None:
            return None
        host = self.url.split("://", 1)[-1].replace("/", "_").replace(":", "_")
        return self.cache / host / f"{what}.json"

    def get(self, path: str) -> Any:
        """The JSON at ``path``; from the cache when there, else fetched and cached."""
        cached = self._cache_file(path.strip("/").replace("/", "_"))
        if cached is not None and cached.is_file():
            try:
                return read_json(cached, MAX_SCHEMA, "registry cache file")
            except InputError:
                pass  # a damaged cache entry: asked again, then replaced
        if self.offline:
            raise SchemaError(f"registry {self.url} is unreachable and {path} is not in the cache")
        body = self._fetch(path)
        try:
            doc = load_json(body, f"registry {self.url} answered {path} with something")
        except InputError as e:
            raise SchemaError(f"{e}: is --registry the Schema Registry's URL?") from None
        if cached is not None:
            try:
                cached.parent.mkdir(parents=True, exist_ok=True)
                tmp = cached.with_suffix(".tmp")
                tmp.write_bytes(body)
                os.replace(tmp, cached)
            except OSError as e:
                print(
                    f"kdissect: cannot cache registry answers in {self.cache} "
                    f"({e.strerror or e}); going on without a cache",
                    file=sys.stderr,
                )
                self.cache = None
        return doc

    def _fetch(self, path: str) -> bytes:
        """The body of GET ``path`` (None-free: 404 raises _NotFound)."""
        req = urllib.request.Request(self.url + path, headers=self.headers)
        handlers: list[Any] = [_SameHostRedirects()]
        if self.url.startswith("https:"):
            context = ssl.create_default_context(cafile=self.cafile)
            if self.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            handlers.append(urllib.request.HTTPSHandler(context=context))
        opener = urllib.request.build_opener(*handlers)
        stop = time.monotonic() + self.deadline
        try:
            with opener.open(req, timeout=self.timeout) as r:
                chunks, size = [], 0
                while True:
                    chunk = r.read1(1 << 16)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > MAX_SCHEMA:
                        raise SchemaError(
                            f"registry {self.url}: the answer to {path} is "
                            f"larger than {MAX_SCHEMA >> 20} MiB"
                        )
                    if time.monotonic() > stop:
                        raise SchemaError(
                            f"registry {self.url}: the answer to {path} took "
                            f"longer than {self.deadline:g} s"
                        )
                    chunks.append(chunk)
                return b"".join(chunks)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise _NotFound() from None
            if e.code in (401, 403):
                raise SchemaError(
                    f"registry {self.url} refused {path} (HTTP {e.code}): "
                    f"give --registry-user/--registry-password"
                ) from None
            raise SchemaError(f"registry {self.url}: HTTP {e.code} for {path}") from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            self.offline = True
            reason = getattr(e, "reason", e)
            raise SchemaError(
                f"registry {self.url} is unreachable ({reason}); schemas "
                f"already cached are still used (--registry-cache)"
            ) from None

    def schema(self, schema_id: int) -> Schema | None:
        doc = self._get(f"/schemas/ids/{schema_id}")
        if doc is None:
            return None
        refs: dict[str, str] = {}
        self._references(doc.get("references") or [], refs, 0)
        kind = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": "json"}.get(
            doc.get("schemaType") or "AVRO", "avro"
        )
        return parse_schema(doc["schema"], kind, f"id {schema_id}", refs)

    def _get(self, path: str) -> dict | None:
        """A schema answer ({"schema": text, "schemaType", "references"}), checked for
        shape, or None if the registry has none (404)."""
        try:
            doc = self.get(path)
        except _NotFound:
            return None
        refs = doc.get("references") if isinstance(doc, dict) else None
        if (
            not isinstance(doc, dict)
            or not isinstance(doc.get("schema"), str)
            or not isinstance(doc.get("schemaType") or "", str)
            or not isinstance(refs or [], list)
            or not all(
                isinstance(r, dict)
                and isinstance(r.get("name"), str)
                and isinstance(r.get("subject"), str)
                and isinstance(r.get("version"), int)
                for r in refs or []
            )
        ):
            raise SchemaError(
                f"registry {self.url}: the answer to {path} is not a schema "
                f'(expected {{"schema": text, "references": [{{name, '
                f"subject, version}}]}}); is --registry the Schema Registry's URL?"
            )
        return doc

    def _references(self, refs: list, out: dict[str, str], depth: int) -> None:
        """Imported schemas (Protobuf imports, Avro named types) by name, recursively."""
        if depth > 16:
            raise SchemaError(f"registry {self.url}: schema references nest too deep")
        for ref in refs:
            name = ref["name"]
            if name in out:
                continue
            where = (
                f"/subjects/{urllib.parse.quote(ref['subject'], safe='')}/versions/{ref['version']}"
            )
            doc = self._get(where)
            if doc is None:
                raise SchemaError(
                    f"registry {self.url}: reference {name} "
                    f"({ref['subject']} v{ref['version']}) not found"
                )
            out[name] = doc["schema"]
            self._references(doc.get("references") or [], out, depth + 1)


class _NotFound(Exception):
    """HTTP 404: the registry has no such schema."""


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects followed, the credentials only to the host they were given for."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if (
            new is not None
            and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc
        ):
            for key in [k for k in new.headers if k.lower() == "authorization"]:
                del new.headers[key]
            new.unredirected_hdrs.pop("Authorization", None)
        return new


def default_cache() -> Path:
    return Path(os.environ.get("KDISSECT_CACHE", Path.home() / ".cache" / "kdissect")) / "registry"
