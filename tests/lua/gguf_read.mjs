// gguf_read.mjs: reads a GGUF file with @huggingface/gguf (an independent reader) and prints
// what it found, one record a line, tab-separated, for tests/lua/gguf_spec.lua to compare:
//   D <tensor data offset>
//   M <key> <typeof value> <value>          (arrays: one A line per element)
//   A <key> <1-based index> <typeof> <value>
//   T <name> <ggml type> <offset> <dims, fastest first, comma-separated>
// Usage: node gguf_read.mjs <folder holding node_modules> <file>
import { createRequire } from 'module';
import path from 'path';
const [dir, file] = process.argv.slice(2);
const require = createRequire(path.join(dir, 'index.js'));
const { gguf } = require('@huggingface/gguf');
const r = await gguf(path.resolve(file), { allowLocalFile: true });
const out = [`D\t${r.tensorDataOffset}`];
for (const [k, v] of Object.entries(r.metadata)) {
  if (Array.isArray(v)) v.forEach((e, i) => out.push(`A\t${k}\t${i + 1}\t${typeof e}\t${e}`));
  else out.push(`M\t${k}\t${typeof v}\t${v}`);
}
for (const t of r.tensorInfos) out.push(`T\t${t.name}\t${t.dtype}\t${t.offset}\t${t.shape.join(',')}`);
console.log(out.join('\n'));
