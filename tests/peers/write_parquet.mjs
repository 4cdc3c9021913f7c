// Writes parquet fixtures with a real parquet writer that is not ours: parquet-wasm, which is
// arrow-rs's parquet crate compiled to WebAssembly (tables built with apache-arrow's JS library).
// data/parquet.cc is checked against them (tests/integration/parquet_peer_test.sh).
//
//   node tests/peers/write_parquet.mjs <out dir> [gsm8k rows, default 97]
//   node tests/peers/write_parquet.mjs --bench <out.parquet> <rows>   (bench/parquet_bench.sh)
//
// Writes, into <out dir>:
//  - gsm8k_<codec>_<dict|plain>_<v1|v2>_<rg1|rgN>.parquet: verl's gsm8k shape (examples/data_preprocess/
//    gsm8k.py: prompt as list<struct<role, content>>, reward_model struct, extra_info struct) in every
//    combination of codec, dictionary encoding, data page version and row groups;
//  - types_*.parquet: every column type of the subset we read, with nulls at every nesting level;
//  - unsupported_*.parquet: files outside the subset (a DELTA encoding, a codec we do not link);
//  - <name>.expected.json: the rows as JSON (what the reader must return, exactly);
//  - manifest.json: [{"file", "expected"} | {"file", "error": [substrings the error must contain]}].
//
// pyarrow (what verl's preprocess scripts use through pandas) falls back to PLAIN when a dictionary
// is off or full, also with data page v2; arrow-rs would pick DELTA_* for v2 pages, so the fallback
// encoding is set to PLAIN here to write what pyarrow writes.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  Bool, Field, Float32, Float64, Int32, Int64, List, Null, RecordBatch, Schema, Struct, Table, Utf8,
  makeData, tableToIPC, vectorFromArray,
} from "apache-arrow";
import * as pq from "parquet-wasm";

const args = process.argv.slice(2);
const bench = args[0] === "--bench";
if (bench) args.shift();
const [outDir, rowsArg] = args;
if (!outDir) {
  console.error("usage: node write_parquet.mjs <out dir> [gsm8k rows]");
  process.exit(2);
}
const gsm8kRows = Number(rowsArg || 97);
if (!bench) mkdirSync(outDir, { recursive: true });

// A small seeded generator, so that the fixtures are the same on every run.
let state = 20260412;
const rand = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state / 4294967296;
};
const pick = (xs) => xs[Math.floor(rand() * xs.length)];

const utf8 = () => new Utf8();
const field = (name, type, nullable = true) => new Field(name, type, nullable);
const listOf = (type) => new List(field("element", type));

// verl's examples/data_preprocess/gsm8k.py, row for row.
function gsm8k(n) {
  const names = ["Natalia", "Weng", "Betty", "Julie", "James", "Mark", "Élodie", "李雷"];
  const rows = [];
  for (let i = 0; i < n; ++i) {
    const a = 1 + Math.floor(rand() * 90), b = 1 + Math.floor(rand() * 90);
    const who = pick(names);
    const question = `${who} sold ${a} clips in April, and ${b} in May. How many clips did ${who} sell?` +
      (i % 5 === 0 ? "\nShow your work." : "");
    const instruction = 'Let\'s think step by step and output the final answer after "####".';
    const answer = `${who} sold ${a}+${b} = <<${a}+${b}=${a + b}>>${a + b} clips.\n#### ${a + b}`;
    rows.push({
      data_source: "openai/gsm8k",
      prompt: [{ role: "user", content: question + " " + instruction }],
      ability: "math",
      reward_model: { style: "rule", ground_truth: String(a + b) },
      extra_info: { split: i % 4 === 0 ? "test" : "train", index: i, answer, question },
    });
  }
  const type = {
    data_source: utf8(),
    prompt: listOf(new Struct([field("role", utf8()), field("content", utf8())])),
    ability: utf8(),
    reward_model: new Struct([field("ground_truth", utf8()), field("style", utf8())]),
    extra_info: new Struct([field("answer", utf8()), field("index", new Int64()), field("question", utf8()),
                            field("split", utf8())]),
  };
  return { rows, type };
}

// Every type of the subset, with nulls at every level of nesting.
function types() {
  const rows = [];
  const words = ["", "a", "héllo", "日本語", "tab\there", "quote\"s", "x".repeat(300)];
  for (let i = 0; i < 61; ++i) {
    const nul = (k) => i % k === 0;
    rows.push({
      id: i,  // required (not nullable): no definition level
      i32: nul(7) ? null : (i % 2 ? -1 : 1) * i * 65537 + (i === 60 ? 2147483647 - 60 * 65537 : 0),
      i64: nul(5) ? null : (i % 3 === 0 ? 9007199254740991 - i : -4294967296 * i),
      f32: nul(6) ? null : i * 0.25 - 3.5,
      f64: nul(4) ? null : (i % 2 ? 3.141592653589793 * i : -1.0e300 / (i + 1)),
      flag: nul(3) ? null : i % 2 === 1,
      nothing: null,
      text: nul(8) ? null : words[i % words.length],
      tags: nul(9) ? null : (i % 4 === 1 ? [] : [`t${i}`, i % 3 ? null : "", "z"].slice(0, 1 + (i % 3))),
      matrix: nul(10) ? null : Array.from({ length: i % 3 }, (_, r) =>
        (r + i) % 4 === 0 ? null : Array.from({ length: (r + i) % 3 }, (_, c) => (c === 1 && i % 2 ? null : i * 10 + c))),
      meta: nul(11) ? null : {
        a: i % 2 ? i : null,
        b: i % 6 === 0 ? null : { c: i % 3 ? `c${i}` : null, d: i % 5 ? [i, -i] : [] },
      },
    });
  }
  const type = {
    id: new Int64(), i32: new Int32(), i64: new Int64(), f32: new Float32(), f64: new Float64(),
    flag: new Bool(), nothing: new Null(), text: utf8(), tags: listOf(utf8()),
    matrix: listOf(listOf(new Int64())),
    meta: new Struct([field("a", new Int32()),
                      field("b", new Struct([field("c", utf8()), field("d", listOf(new Int32()))]))]),
  };
  return { rows, type, required: new Set(["id"]) };
}

// JS numbers for Int64 columns become BigInt for arrow.
function toArrow(value, type) {
  if (value === null || value === undefined) return value;
  if (type instanceof Int64) return BigInt(value);
  if (type instanceof List) return value.map((v) => toArrow(v, type.children[0].type));
  if (type instanceof Struct) {
    const out = {};
    for (const f of type.children) out[f.name] = toArrow(value[f.name], f.type);
    return out;
  }
  return value;
}

function table({ rows, type, required = new Set() }) {
  const fields = [], children = [];
  for (const [name, t] of Object.entries(type)) {
    const vector = vectorFromArray(rows.map((r) => toArrow(r[name], t)), t);
    fields.push(field(name, t, !required.has(name)));
    children.push(vector.data[0]);
  }
  const struct = new Struct(fields);
  return new Table(new RecordBatch(new Schema(fields),
                                   makeData({ type: struct, length: rows.length, nullCount: 0, children })));
}

const codecs = { uncompressed: pq.Compression.UNCOMPRESSED, snappy: pq.Compression.SNAPPY,
                 gzip: pq.Compression.GZIP, zstd: pq.Compression.ZSTD };

function write(name, tbl, { codec = "zstd", dictionary = true, version = 1, rowGroupSize, pageSize,
                            encoding = pq.Encoding.PLAIN, columnEncoding } = {}) {
  let props = new pq.WriterPropertiesBuilder()
    .setCompression(codecs[codec] ?? codec)
    .setDictionaryEnabled(dictionary)
    .setWriterVersion(version === 2 ? pq.WriterVersion.V2 : pq.WriterVersion.V1)
    .setEncoding(encoding);
  if (rowGroupSize) props = props.setMaxRowGroupSize(rowGroupSize);
  if (pageSize) props = props.setDataPageSizeLimit(pageSize).setWriteBatchSize(8);
  if (columnEncoding) {
    for (const [col, enc] of Object.entries(columnEncoding)) props = props.setColumnEncoding(col, enc);
  }
  const wasmTable = pq.Table.fromIPCStream(tableToIPC(tbl, "stream"));
  const bytes = pq.writeParquet(wasmTable, props.build());
  writeFileSync(join(outDir, name), bytes);
  return name;
}

if (bench) {  // one file as pandas writes it by default: zstd here, dictionary, v1 pages, one row group
  const props = new pq.WriterPropertiesBuilder().setCompression(pq.Compression.ZSTD).setEncoding(pq.Encoding.PLAIN)
    .setMaxRowGroupSize(1 << 20).build();
  writeFileSync(outDir, pq.writeParquet(pq.Table.fromIPCStream(tableToIPC(table(gsm8k(gsm8kRows)), "stream")), props));
  process.exit(0);
}

const manifest = [];
const expect = (name, rows) => {
  writeFileSync(join(outDir, name), JSON.stringify(rows));
  return name;
};

const g = gsm8k(gsm8kRows);
const gTable = table(g);
const gExpected = expect("gsm8k.expected.json", g.rows);
const t = types();
const tTable = table(t);
const tExpected = expect("types.expected.json", t.rows);

for (const codec of Object.keys(codecs)) {
  for (const dictionary of [true, false]) {
    for (const version of [1, 2]) {
      for (const groups of ["rg1", "rgN"]) {
        const opts = { codec, dictionary, version,
                       ...(groups === "rgN" ? { rowGroupSize: 13, pageSize: 256 } : {}) };
        const suffix = `${codec}_${dictionary ? "dict" : "plain"}_v${version}_${groups}`;
        manifest.push({ file: write(`gsm8k_${suffix}.parquet`, gTable, opts), expected: gExpected });
        manifest.push({ file: write(`types_${suffix}.parquet`, tTable, opts), expected: tExpected });
      }
    }
  }
}
// A dictionary that fills up part-way through a column chunk: the writer falls back to PLAIN pages
// after dictionary-encoded ones, in one chunk.
manifest.push({
  file: write("types_dict_fallback.parquet", tTable, { pageSize: 64 }),
  expected: tExpected,
});
{
  const props = new pq.WriterPropertiesBuilder().setDictionaryPageSizeLimit(200).setDataPageSizeLimit(200)
    .setWriteBatchSize(4).setEncoding(pq.Encoding.PLAIN).build();
  writeFileSync(join(outDir, "gsm8k_dict_fallback.parquet"),
                pq.writeParquet(pq.Table.fromIPCStream(tableToIPC(gTable, "stream")), props));
  manifest.push({ file: "gsm8k_dict_fallback.parquet", expected: gExpected });
}
// Booleans RLE-encoded (what arrow-rs writes for v2 pages by default).
manifest.push({
  file: write("types_bool_rle_v2.parquet", tTable,
              { version: 2, dictionary: false, columnEncoding: { flag: pq.Encoding.RLE } }),
  expected: tExpected,
});
// Outside the subset: a clear error naming the column and what was found.
manifest.push({
  file: write("unsupported_delta.parquet", tTable,
              { version: 2, dictionary: false, columnEncoding: { i64: pq.Encoding.DELTA_BINARY_PACKED } }),
  error: ["column 'i64'", "DELTA_BINARY_PACKED", "to_parquet"],
});
manifest.push({
  file: write("unsupported_brotli.parquet", gTable, { codec: pq.Compression.BROTLI }),
  error: ["data_source", "BROTLI", "compression="],
});
manifest.push({
  file: write("unsupported_lz4.parquet", gTable, { codec: pq.Compression.LZ4_RAW }),
  error: ["data_source", "LZ4_RAW", "compression="],
});
writeFileSync(join(outDir, "manifest.json"), JSON.stringify(manifest, null, 1));
console.error(`write_parquet: ${manifest.length} files in ${outDir}`);
