// The key operations of @mbc-cqrs-serverless/core on the generated inputs that the Rust bench
// (tools/bench-floor/benches/keys_vs_node.rs) runs through cqrs-keys.
//
//   node keys.js INPUTS.json OUT.json
//
// The helpers are the package's own (dist/helpers/key.js: generateId, addSortKeyVersion,
// removeSortKeyVersion, getSortKeyVersion). The package has no composite-key or entity-key
// helper: for those the bench runs what a user of the package writes, `parts.join('#')`,
// `key.split('#')` and a split at the first '#', with the package's KEY_SEPARATOR and no
// validation. The whole package is loaded too, to check that its exports are these functions.
//
// Method, as criterion's: a warm-up of 500 ms (V8 optimises the hot loops), then 30 samples of
// at least 60 ms, each running the operation over all inputs a calibrated number of times; the
// figure is the median sample's time per operation. Results are consumed (lengths and versions
// summed) so that nothing is optimised away; the sums are written to OUT as a check against Rust.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const pkgDir = path.dirname(require.resolve('@mbc-cqrs-serverless/core/package.json'));
const key = require(path.join(pkgDir, 'dist/helpers/key.js'));
const { KEY_SEPARATOR } = require(path.join(pkgDir, 'dist/constants/key.js'));
const core = require('@mbc-cqrs-serverless/core');
for (const name of ['generateId', 'addSortKeyVersion', 'removeSortKeyVersion', 'getSortKeyVersion']) {
  if (core[name] !== key[name]) throw new Error(`the package does not export dist/helpers/key.js's ${name}`);
}

const [inputsPath, outPath] = process.argv.slice(2);
const inputs = JSON.parse(fs.readFileSync(inputsPath, 'utf8'));
const n = inputs.length;

function parseEntityKey(k) {
  const at = k.indexOf(KEY_SEPARATOR);
  if (at <= 0) throw new Error(`not an entity key: ${k}`);
  return [k.substring(0, at), k.substring(at + 1)];
}

// Each returns a number computed from every result, over all inputs once.
const ops = {
  generate_id: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += key.generateId(inputs[i].pk, inputs[i].skv).length;
    return s;
  },
  add_sort_key_version: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += key.addSortKeyVersion(inputs[i].sk, inputs[i].version).length;
    return s;
  },
  remove_sort_key_version: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += key.removeSortKeyVersion(inputs[i].skv).length;
    return s;
  },
  sort_key_version: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += key.getSortKeyVersion(inputs[i].skv);
    return s;
  },
  composite_key: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += inputs[i].parts.join(KEY_SEPARATOR).length;
    return s;
  },
  parse_composite_key: () => {
    let s = 0;
    for (let i = 0; i < n; i++) s += inputs[i].composite.split(KEY_SEPARATOR).length;
    return s;
  },
  parse_entity_key: () => {
    let s = 0;
    for (let i = 0; i < n; i++) {
      const [t, id] = parseEntityKey(inputs[i].entity);
      s += t.length + id.length;
    }
    return s;
  },
};

const now = () => process.hrtime.bigint();
let sink = 0;

function measure(op) {
  const warmUntil = now() + 500_000_000n;
  let reps = 0;
  while (now() < warmUntil) {
    sink += op();
    reps++;
  }
  // Repetitions per sample: about 60 ms, at least one.
  const perRep = 500_000_000 / Math.max(reps, 1);
  const repsPerSample = Math.max(1, Math.ceil(60_000_000 / perRep));
  const samples = [];
  for (let s = 0; s < 30; s++) {
    const t0 = now();
    for (let r = 0; r < repsPerSample; r++) sink += op();
    samples.push(Number(now() - t0) / (repsPerSample * n));
  }
  samples.sort((a, b) => a - b);
  return { median_ns: samples[15], min_ns: samples[0], max_ns: samples[29], samples: 30 };
}

const out = { node: process.version, package: require(path.join(pkgDir, 'package.json')).version, inputs: n, ops: {}, check: {} };
for (const [name, op] of Object.entries(ops)) {
  out.check[name] = op();
  out.ops[name] = measure(op);
  process.stderr.write(`node ${name}: ${out.ops[name].median_ns.toFixed(1)} ns/op\n`);
}
out.sink = sink;
fs.writeFileSync(outPath, JSON.stringify(out, null, 2));
