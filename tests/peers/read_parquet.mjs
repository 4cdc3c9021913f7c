// Reads parquet files with hyparquet (a second reader that is not ours, with hyparquet-compressors
// for zstd/gzip) and prints the rows as JSON, or with --time only how long reading took.
// The second opinion on the fixtures of write_parquet.mjs and the peer of docs/BENCHMARKS.md.
//
//   node tests/peers/read_parquet.mjs [--time] <file.parquet>...
import { readFileSync } from "node:fs";
import { parquetReadObjects } from "hyparquet";
import { compressors } from "hyparquet-compressors";

const args = process.argv.slice(2);
const time = args[0] === "--time";
const files = time ? args.slice(1) : args;
// BigInt (INT64 columns) as a JSON number, exactly.
const toJson = (rows) => JSON.stringify(rows, (_, v) => (typeof v === "bigint" ? `@@${v}@@` : v))
  .replace(/"@@(-?\d+)@@"/g, "$1");
for (const file of files) {
  const start = process.hrtime.bigint();
  const buf = readFileSync(file);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const rows = await parquetReadObjects({ file: ab, compressors });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (time) console.log(JSON.stringify({ file, rows: rows.length, ms }));
  else console.log(toJson(rows));
}
