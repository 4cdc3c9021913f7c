#!/usr/bin/python3
"""A reader of TensorBoard event files that is not ours: Google's protobuf runtime (Debian's
python3-protobuf, messages compiled by protoc from protobuf-compiler) decodes each Event, and
crcmod's predefined CRC-32C (python3-crcmod) checks the TFRecord framing. scripts/setup installs
all three; a missing one is an error (exit 2), never a skip.

The schema below declares the fields of tensorboard/compat/proto/event.proto and summary.proto
that a scalar writer uses, with their field numbers; a field the writer puts under any other
number is reported as unknown (exit 1).

Usage: read_tfevents.py FILE  -> prints one JSON object per event on stdout:
  {"wall_time": s, "step": n, "file_version": "...", "session_log": "START", "values": {tag: float}}
  (a non-finite value as the string "nan", "inf" or "-inf": strict JSON has no such numbers)
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

SCHEMA = """
syntax = "proto3";
package tensorboard;

message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    bytes graph_def = 4;
    Summary summary = 5;
    SessionLog session_log = 7;
  }
}

message SessionLog {
  enum SessionStatus {
    STATUS_UNSPECIFIED = 0;
    START = 1;
    STOP = 2;
    CHECKPOINT = 3;
  }
  SessionStatus status = 1;
  string checkpoint_path = 2;
  string msg = 3;
}

message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    oneof value {
      float simple_value = 2;
      bytes obsolete_old_style_histogram = 3;
    }
  }
  repeated Value value = 1;
}
"""


def fail(code, message):
    print("read_tfevents: " + message, file=sys.stderr)
    sys.exit(code)


def load_event_class():
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        fail(2, "python3-protobuf is missing (scripts/setup installs it)")
    tmp = tempfile.mkdtemp(prefix="tfevents_peer_")
    with open(os.path.join(tmp, "tb_event.proto"), "w") as f:
        f.write(SCHEMA)
    try:
        subprocess.run(["protoc", "--proto_path=" + tmp, "--python_out=" + tmp, "tb_event.proto"], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        fail(2, "protoc (protobuf-compiler) failed or is missing: %s" % e)
    sys.path.insert(0, tmp)
    import tb_event_pb2
    return tb_event_pb2


def crc32c_masked():
    try:
        import crcmod.predefined
    except ImportError:
        fail(2, "python3-crcmod is missing (scripts/setup installs it)")
    crc = crcmod.predefined.mkCrcFun("crc-32c")

    def masked(data):
        c = crc(data)
        return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

    return masked


def unknown_fields(msg):
    n = len(msg.UnknownFields())
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        items = value if field.label == field.LABEL_REPEATED else [value]
        n += sum(unknown_fields(v) for v in items)
    return n


def main():
    if len(sys.argv) != 2:
        fail(2, "usage: read_tfevents.py FILE")
    pb = load_event_class()
    masked = crc32c_masked()
    data = open(sys.argv[1], "rb").read()
    pos, index = 0, 0
    while pos < len(data):
        if len(data) - pos < 12:
            fail(1, "record %d: %d trailing bytes, not a record header" % (index, len(data) - pos))
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if header_crc != masked(header):
            fail(1, "record %d: length CRC mismatch" % index)
        payload = data[pos + 12:pos + 12 + length]
        if len(payload) != length or len(data) < pos + 16 + length:
            fail(1, "record %d: truncated" % index)
        (payload_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if payload_crc != masked(payload):
            fail(1, "record %d: data CRC mismatch" % index)
        event = pb.Event()
        event.ParseFromString(payload)
        if unknown_fields(event):
            fail(1, "record %d: fields that tensorboard's Event does not have" % index)
        out = {"wall_time": event.wall_time, "step": event.step}
        kind = event.WhichOneof("what")
        if kind == "file_version":
            out["file_version"] = event.file_version
        elif kind == "session_log":
            out["session_log"] = pb.SessionLog.SessionStatus.Name(event.session_log.status)
        elif kind == "summary":
            values = {}
            for v in event.summary.value:
                if v.WhichOneof("value") != "simple_value":
                    fail(1, "record %d: tag %s is not a simple_value" % (index, v.tag))
                x = v.simple_value
                values[v.tag] = x if math.isfinite(x) else str(x)  # "nan", "inf", "-inf"
            out["values"] = values
        print(json.dumps(out))
        pos += 16 + length
        index += 1


if __name__ == "__main__":
    main()
