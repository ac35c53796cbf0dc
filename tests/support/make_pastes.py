"""Make the paste corpus in captures/blobs/pastes/: Kafka messages of the bundled captures
(real traffic), written in the shapes people paste them in (code of each client's test
suite, logs, tool output), and corpus.json saying what each paste must give.

The code shapes are written here, after the shape of the sources named in
captures/blobs/README.md; the dumps are the output of the real tools (xxd, hexdump,
od, tcpdump, tshark) run on the captures' bytes and packets. Run again with
``.venv/bin/python -m tests.support.make_pastes`` (needs xxd, hexdump, od, tcpdump, tshark).
"""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import tempfile
from pathlib import Path

from kdissect.protocol import decode_request
from kdissect.sources.pcap import exchanges_in

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "captures" / "blobs" / "pastes"


def exchanges(name: str):
    return exchanges_in([str(ROOT / "captures" / f"{name}.pcap")]).exchanges


def find(name: str, key: int, version: int, nth: int = 0):
    found = [
        e
        for e in exchanges(name)
        if e.request is not None and e.first.api_key == key and e.request.api_version == version
    ]
    return found[nth]


def sized(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def tool(args: list[str], data: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(data)
        f.flush()
        return subprocess.run(args + [f.name], capture_output=True, text=True, check=True).stdout


def records_region(data: bytes) -> bytes:
    """The bytes of the first record batch / message set field of a request."""
    msg = decode_request(data)
    node = next(n for n in msg.tree.walk() if n.ktype == "records" and n.length > 0)
    # the records field's own length prefix (its _length child) comes first
    first = min(c.offset for c in node.children if not c.name.startswith("_"))
    return data[first : node.offset + node.length]


def body_of(msg_data: bytes, header: int) -> bytes:
    return msg_data[header:]


def chunks(data: bytes, n: int):
    return [data[i : i + n] for i in range(0, len(data), n)]


def c_array(data: bytes, name: str) -> str:
    lines = [f"/* {name}: written out of a debugging session */", "ui8 reference[] = {"]
    for i, part in enumerate(chunks(data, 12)):
        lines.append(
            "    "
            + ", ".join(f"0x{b:02x}" for b in part)
            + ","
            + ("   /* size */" if i == 0 else "")
        )
    lines.append("};")
    return "\n".join(lines) + "\n"


def java_concat(data: bytes) -> str:
    parts = [f'        "{c.hex()}"' for c in chunks(data, 16)]
    return (
        "    // the frame as the broker got it\n    String frame =\n"
        + " +\n".join(parts)
        + ";\n    byte[] bytes = Hex.decodeHex(frame);\n"
    )


def js_concat(data: bytes) -> str:
    parts = [f"  '{c.hex()}'" for c in chunks(data, 12)]
    return "const frame = Buffer.from(\n" + " +\n".join(parts) + ",\n  'hex')\n"


def py_escape(part: bytes) -> str:
    out = []
    for b in part:
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in "'\\" else f"\\x{b:02x}")
    return "".join(out)


def python_tuple(data: bytes, comments: list[str]) -> str:
    lines = ["    expected = b''.join(["]
    for i, part in enumerate(chunks(data, 10)):
        note = comments[i] if i < len(comments) else ""
        lines.append(f"        b'{py_escape(part)}',  # {note}".rstrip(" #").rstrip())
    lines.append("    ])")
    return "\n".join(lines) + "\n"


def python_split(data: bytes) -> str:
    lines = ["request = ("]
    for i, part in enumerate(chunks(data, 14)):
        lines.append(f"    b'{py_escape(part)}'" + ("  # header" if i == 0 else ""))
    lines.append(")")
    return "\n".join(lines) + "\n"


def go_bytes(data: bytes, name: str) -> str:
    lines = [f"var {name} = []byte{{"]
    for i, part in enumerate(chunks(data, 8)):
        items = [f"'{chr(b)}'" if chr(b).isalnum() else f"0x{b:02X}" for b in part]
        lines.append("\t" + ", ".join(items) + "," + (" // first field" if i == 0 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def rust_array(data: bytes) -> str:
    lines = ["let bytes: Vec<u8> = vec!["]
    for i, part in enumerate(chunks(data, 8)):
        items = [f"0b{b:08b}" if (i + j) % 7 == 3 else f"0x{b:02x}" for j, b in enumerate(part)]
        lines.append("    " + ", ".join(items) + "," + (" // base offset" if i == 0 else ""))
        if i == 1:
            lines.append("    /* length, leader epoch, magic */")
    lines.append("];")
    return "\n".join(lines) + "\n"


def _runs(data: bytes):
    """(is_text, bytes) runs: printable runs of 3 or more are text."""
    out, i = [], 0
    while i < len(data):
        j = i
        while j < len(data) and 32 <= data[j] < 127 and data[j] not in b'"\\#':
            j += 1
        if j - i >= 3:
            out.append((True, data[i:j]))
            i = j
        else:
            out.append((False, data[i : i + 1]))
            i += 1
    return out


def _segments(data: bytes, text_suffix: str, per_line: int, indent: str) -> list[str]:
    """The rest of a binary: text runs as strings, other bytes as integers, a few a line."""
    items = [
        f'"{part.decode()}"{text_suffix}' if text else str(part[0]) for text, part in _runs(data)
    ]
    lines = [
        indent + ", ".join(items[k : k + per_line]) + "," for k in range(0, len(items), per_line)
    ]
    lines[-1] = lines[-1].rstrip(",")
    return lines


def elixir_binary(data: bytes) -> str:
    lines = [
        "    request = <<",
        f"      {struct.unpack_from('>h', data)[0]}::16,  # api key",
        f"      {struct.unpack_from('>h', data, 2)[0]}::16,  # version",
        f"      {struct.unpack_from('>i', data, 4)[0]}::32-signed,  # correlation id",
        *_segments(data[8:], "::binary", 10, "      "),
        "    >>",
    ]
    return "\n".join(lines) + "\n"


def erlang_binary(data: bytes) -> str:
    lines = [
        "Expected = <<",
        f"    {struct.unpack_from('>h', data)[0]}:16,"
        f" {struct.unpack_from('>h', data, 2)[0]}:16,  % api key, version",
        *_segments(data[4:], "", 12, "    "),
        ">>,",
    ]
    return "\n".join(lines) + "\n"


def node_buffer(data: bytes) -> str:
    return json.dumps({"type": "Buffer", "data": list(data)}) + "\n"


def scala_array(data: bytes) -> str:
    vals = [str(b - 256 if b > 127 else b) for b in data]
    return "  val bytes = Array[Byte](" + ", ".join(vals) + ")\n"


def go_println(data: bytes) -> str:
    return "2024/03/01 10:12:44 sending: [" + " ".join(map(str, data)) + "]\n"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []

    def add(file: str, text: str, data: bytes, shape: str, source: str, **expect) -> None:
        (OUT / file).write_text(text)
        cases.append(
            {"file": file, "shape": shape, "source": source, "bytes": data.hex(), **expect}
        )

    api_versions = find("kcat", 18, 3)
    add(
        "wireshark-hex-stream.txt",
        "Hex Stream: " + api_versions.request.data.hex() + "\n",
        api_versions.request.data,
        "a label before hex",
        "Wireshark 'Copy as Hex Stream'",
        expect=["ApiVersions", 3, "request"],
    )

    metadata = find("kcat", 3, 12)
    add(
        "python-assign.py",
        f'frame_hex = "{sized(metadata.request.data).hex()}"\nframe = bytes.fromhex(frame_hex)\n',
        sized(metadata.request.data),
        "an assignment of quoted hex",
        "kafka-python issues",
        expect=["Metadata", 12, "request"],
    )

    produce = find("kcat", 0, 10)
    add(
        "java-concat.java",
        java_concat(sized(produce.request.data)),
        sized(produce.request.data),
        "Java string concatenation",
        "Kafka's Java clients, issues",
        expect=["Produce", 10, "request"],
    )
    add(
        "c-array.c",
        c_array(sized(produce.response.data), "produce response"),
        sized(produce.response.data),
        "a C array",
        "librdkafka issues",
        hints={"api": 0, "version": 10, "direction": "response"},
        expect=["Produce", 10, "response"],
    )
    add(
        "rust-array.rs",
        rust_array(records_region(produce.request.data)),
        records_region(produce.request.data),
        "a Rust array with comments and 0b literals",
        "kafka-protocol-rs tests",
        hints={"records": True},
        expect=["records"],
    )

    legacy_md = find("legacy-0.8.2", 3, 0)
    add(
        "go-println.txt",
        go_println(legacy_md.response.data),
        legacy_md.response.data,
        "Go's fmt.Println of a []byte",
        "sarama issues",
        expect=["Metadata", 0, "response"],
    )
    legacy_produce = find("legacy-0.8.2", 0, 0)
    add(
        "python-tuple.py",
        python_tuple(
            legacy_produce.request.data, ["api key, version, correlation id", "client id"]
        ),
        legacy_produce.request.data,
        "Python b'' literals in a list, with # comments",
        "kafka-python tests (test_protocol.py)",
        expect=["Produce", 0, "request"],
    )
    add(
        "messageset-v0.txt",
        legacy_produce.request.data
        and "# the message set only, as logged\n"
        + records_region(legacy_produce.request.data).hex(" ")
        + "\n",
        records_region(legacy_produce.request.data),
        "a bare MessageSet v0 in hex",
        "kafka-python tests",
        hints={"records": True},
        expect=["records"],
    )

    group = [e for e in exchanges("confluent-group") if e.request is not None]
    join = next(e for e in group if e.first.api_key == 11 and len(e.request.data) > 150)
    add(
        "elixir-binary.exs",
        elixir_binary(join.request.data),
        join.request.data,
        'an Elixir binary with ::16 segments, "text"::binary and # comments',
        "kayrock tests",
        expect=["JoinGroup", 5, "request"],
    )
    sync = next(e for e in group if e.first.api_key == 14)
    add(
        "erlang-binary.erl",
        erlang_binary(sync.request.data),
        sync.request.data,
        "an Erlang binary with Int:16 segments, strings and % comments",
        "brod tests",
        expect=["SyncGroup", sync.request.api_version, "request"],
    )
    heartbeat = next(e for e in group if e.first.api_key == 12)
    hb_body = heartbeat.request.data[
        decode_request(heartbeat.request.data).tree.child("header").length :
    ]
    add(
        "go-bytes.go",
        go_bytes(hb_body, "heartbeatRequestV3"),
        hb_body,
        "a Go []byte with 'c' literals and // comments (a body without its header)",
        "sarama tests (*_test.go)",
        hints={
            "body": True,
            "api": 12,
            "version": heartbeat.request.api_version,
            "direction": "request",
        },
        expect=["Heartbeat", heartbeat.request.api_version, "request"],
    )
    md_body = metadata.response.data[5:]  # flexible response header: id + tags
    add(
        "node-buffer.json",
        node_buffer(md_body),
        md_body,
        "Node's JSON of a Buffer (a response body)",
        "kafkajs fixtures (fixtures/*.json)",
        hints={"body": True, "api": 3, "version": 12, "direction": "response"},
        expect=["Metadata", 12, "response"],
    )
    find_coord = next(e for e in group if e.first.api_key == 10)
    add(
        "js-concat.js",
        js_concat(find_coord.request.data),
        find_coord.request.data,
        "JavaScript string concatenation",
        "kafkajs issues",
        expect=["FindCoordinator", find_coord.request.api_version, "request"],
    )
    commit = next(e for e in group if e.first.api_key == 8)
    add(
        "scala-array.scala",
        scala_array(commit.request.data),
        commit.request.data,
        "a Scala Array[Byte] of signed values",
        "Kafka's Scala tests",
        expect=["OffsetCommit", commit.request.api_version, "request"],
    )
    list_offsets = find("kcat", 2, 7)
    add(
        "shell-xxd.sh",
        f'echo -n "{sized(list_offsets.request.data).hex()}" | xxd -r -p '
        "| nc 127.0.0.1 9092 | xxd\n",
        sized(list_offsets.request.data),
        'a shell wrapper: echo -n "..." | xxd -r -p',
        "blog posts, issues",
        expect=["ListOffsets", 7, "request"],
    )

    fetch = [e for e in exchanges("kcat") if e.first.api_key == 1][0]
    add(
        "xxd.txt",
        tool(["xxd"], sized(fetch.response.data)),
        sized(fetch.response.data),
        "xxd",
        "xxd (real output)",
        hints={"api": 1, "version": 16, "direction": "response"},
        expect=["Fetch", 16, "response"],
    )
    admin = exchanges("admin")
    describe = next(e for e in admin if e.first.api_key == 32)
    add(
        "hexdump-C.txt",
        tool(["hexdump", "-C"], describe.request.data),
        describe.request.data,
        "hexdump -C",
        "hexdump -C (real output)",
        expect=["DescribeConfigs", describe.request.api_version, "request"],
    )
    create = next(e for e in admin if e.first.api_key == 19)
    add(
        "od.txt",
        tool(["od", "-A", "x", "-t", "x1z"], create.request.data),
        create.request.data,
        "od -A x -t x1z",
        "od (real output)",
        expect=["CreateTopics", create.request.api_version, "request"],
    )
    add(
        "base64.txt",
        base64.encodebytes(metadata.request.data).decode(),
        metadata.request.data,
        "base64",
        "logs of base64-encoded frames",
        expect=["Metadata", 12, "request"],
    )

    # tcpdump -X and tshark -x on the capture itself: the first four data packets of
    # kcat.pcap, an ApiVersions exchange and a Metadata exchange
    pcap = str(ROOT / "captures" / "kcat.pcap")
    flt = "tcp[tcpflags] & tcp-push != 0"
    dump = subprocess.run(
        ["tcpdump", "-r", pcap, "-X", "-nn", "-c", "4", flt],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    first = exchanges("kcat")[:2]
    stream = b"".join(sized(m.data) for e in first for m in (e.request, e.response))
    add(
        "tcpdump-X.txt",
        dump,
        stream,
        "tcpdump -X with summary lines (4 packets)",
        "tcpdump (real output)",
        expect=["ApiVersions", 3, "request"],
        messages=4,
    )
    shark = subprocess.run(
        ["tshark", "-r", pcap, "-x", "-Y", "tcp.len > 0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    one = shark.split("\n\n")[0] + "\n"  # the first packet's dump
    add(
        "tshark-x.txt",
        one,
        sized(first[0].request.data),
        "Wireshark / tshark -x hex dump",
        "tshark (real output)",
        expect=["ApiVersions", 3, "request"],
    )

    # a fragment from mid-stream: the end of one request, then two whole ones
    conn = [e for e in exchanges("kcat") if e.stream == 4 and e.request is not None]
    tail = sized(conn[0].request.data)[-20:]
    whole = sized(conn[1].request.data) + sized(conn[2].request.data)
    add(
        "fragment.txt",
        (tail + whole).hex(" ") + "\n",
        tail + whole,
        "a fragment from mid-stream (resync)",
        "tcpdump captures started mid-connection",
        expect=[conn[1].first.api_name, conn[1].request.api_version, "request"],
        messages=2,
        skipped=20,
    )
    # a size prefix that does not match: the paste has two bytes more
    extra = sized(api_versions.request.data) + b"\x0d\x0a"
    add(
        "size-mismatch.txt",
        extra.hex() + "\n",
        extra,
        "a size prefix that does not match",
        "pastes with a stray line end",
        expect=["ApiVersions", 3, "request"],
        finding="size_mismatch",
    )
    # hints that disagree with the header: told Metadata v9, the header says v12
    add(
        "hint-disagrees.txt",
        metadata.request.data.hex() + "\n",
        metadata.request.data,
        "hints that disagree with the header",
        "issues",
        hints={"api": 3, "version": 9, "direction": "request"},
        expect=["Metadata", 9, "request"],
        finding="hint_disagrees",
    )
    hb_response = heartbeat.response.data
    add(
        "short-response.txt",
        hb_response.hex(" ") + "\n",
        hb_response,
        "a short response (ambiguous)",
        "issues",
        ambiguous=True,
    )
    # kafkajs's InitProducerId v0 response fixture: the facts of its test (throttle 0,
    # error 0, producer id 1006, epoch 0), a body without header, as Node's JSON
    init_pid = struct.pack(">ihqh", 0, 0, 1006, 0)
    add(
        "kafkajs-init-producer-id.json",
        node_buffer(init_pid),
        init_pid,
        "Node's JSON of a Buffer (a response body)",
        "kafkajs InitProducerId v0 test",
        hints={"body": True, "api": 22, "version": 0, "direction": "response"},
        expect=["InitProducerId", 0, "response"],
    )
    (OUT.parent / "corpus.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"wrote {len(cases)} pastes to {OUT}")


if __name__ == "__main__":
    main()
