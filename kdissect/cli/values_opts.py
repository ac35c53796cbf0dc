"""--schemas, --registry, --value-schema/--key-schema, --values: record keys and values
decoded by schema (docs/guide/values.md). The options reach ``common.budget`` through the
click context, so the commands' signatures stay as they are."""

from __future__ import annotations

import click

_META = "kdissect.values"


def value_options(command):
    def remember(ctx: click.Context, param: click.Parameter, value):
        if value not in (None, (), False):
            ctx.meta.setdefault(_META, {})[param.name] = value
        return value

    def option(*names, **kw):
        return click.option(*names, expose_value=False, callback=remember, **kw)

    for opt in reversed(
        (
            option(
                "--schemas",
                "schemas_dir",
                metavar="DIR",
                type=click.Path(exists=True, file_okay=False),
                help="Schemas by Schema Registry id: DIR/ID.avsc, ID.proto, ID.json "
                "or ID.desc (a FileDescriptorSet). Decodes framed record "
                "values (magic byte 0 + schema id).",
            ),
            option(
                "--registry",
                metavar="URL",
                help="A Confluent-compatible Schema Registry (GET /schemas/ids/ID; "
                "Apicurio: URL/apis/ccompat/v7). Answers are cached on disk, "
                "so the capture can be read again offline.",
            ),
            option("--registry-user", metavar="USER", help="Basic auth user."),
            option(
                "--registry-password",
                metavar="PASSWORD",
                envvar="KDISSECT_REGISTRY_PASSWORD",
                help="Basic auth password (or $KDISSECT_REGISTRY_PASSWORD).",
            ),
            option(
                "--registry-ca",
                metavar="FILE",
                type=click.Path(exists=True, dir_okay=False),
                help="CA certificates (PEM) to verify an https registry.",
            ),
            option(
                "--registry-insecure",
                is_flag=True,
                help="Do not verify the registry's TLS certificate.",
            ),
            option(
                "--registry-cache",
                metavar="DIR",
                help="Where registry answers are cached (default: "
                "~/.cache/kdissect/registry; 'none': no cache).",
            ),
            option(
                "--value-schema",
                "value_schema",
                multiple=True,
                metavar="TOPIC=FILE",
                help="The schema of TOPIC's values, framed or not (repeatable).",
            ),
            option(
                "--key-schema",
                "key_schema",
                multiple=True,
                metavar="TOPIC=FILE",
                help="The schema of TOPIC's keys (repeatable).",
            ),
            option(
                "--values",
                "guess_values",
                is_flag=True,
                help="Decode record values even without schemas: say what "
                "unframed bytes look like (JSON, text, Protobuf).",
            ),
        )
    ):
        command = opt(command)
    return command


def values_source(ctx: click.Context | None):
    """The ``Schemas`` the command line asked for, or None."""
    asked = ctx.meta.get(_META) if ctx is not None else None
    if not asked:
        return None
    from pathlib import Path  # (not at start-up: pathlib pulls urllib, ipaddress)

    from ..schemas_source import Registry, SchemaError, Schemas, default_cache, load_file

    overrides = {}
    try:
        for role in ("value", "key"):
            for spec in asked.get(f"{role}_schema", ()):
                topic, sep, file = spec.partition("=")
                if not sep or not topic or not file:
                    raise click.BadParameter(
                        f"{spec!r} is not TOPIC=FILE", param_hint=f"--{role}-schema"
                    )
                overrides[(topic, role)] = load_file(Path(file))
    except SchemaError as e:
        raise click.ClickException(str(e)) from None
    registry = None
    if asked.get("registry"):
        cache = asked.get("registry_cache")
        if cache and cache != "none" and Path(cache).exists() and not Path(cache).is_dir():
            raise click.BadParameter(
                f"{cache} is a file; give a directory (or 'none')", param_hint="--registry-cache"
            )
        registry = Registry(
            asked["registry"],
            None if cache == "none" else Path(cache) if cache else default_cache(),
            asked.get("registry_user"),
            asked.get("registry_password"),
            asked.get("registry_ca"),
            bool(asked.get("registry_insecure")),
        )
    elif any(k.startswith("registry_") for k in asked):
        raise click.UsageError("--registry-* options need --registry URL")
    directory = Path(asked["schemas_dir"]) if asked.get("schemas_dir") else None
    return Schemas(directory, registry, overrides)
