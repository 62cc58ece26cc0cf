// The negative test of the type errors: src/type-errors.ts with its `@ts-expect-error` comments
// removed must fail to type-check with exactly the errors the comments announce.
//
//   node scripts/negative-check.mjs        (after `npm run generate`; scripts/typescript-client.sh check runs it)
//
// Each `// @ts-expect-error TSxxxx `fragment` why` comment announces error TSxxxx on the next line,
// whose text (the diagnostic and its elaboration) contains `fragment`. The copy keeps every line in
// place (the comment becomes a plain one), is type-checked with tsconfig.negative.json and deleted.
// Fails (exit 1) when tsc passes, when an announced error is missing, and on any other error.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const source = path.join(root, "src/type-errors.ts");
const copy = path.join(root, "src/type-errors.negative.ts");
const copyRel = "src/type-errors.negative.ts";
const DIRECTIVE = /^\s*\/\/\s*@ts-expect-error\b/;
const MARKER = /^\s*\/\/ @ts-expect-error (TS\d+)(?: `([^`]+)`)?/;

const lines = fs.readFileSync(source, "utf8").split("\n");
const expected = [];
lines.forEach((line, i) => {
  if (!DIRECTIVE.test(line)) return;
  const m = MARKER.exec(line);
  if (!m) {
    console.error(`FAIL: src/type-errors.ts:${i + 1}: a @ts-expect-error without its error code: ${line.trim()}`);
    process.exit(1);
  }
  // Diagnostics count lines from 1: the line below the comment (index i + 1) is line i + 2.
  expected.push({ line: i + 2, code: m[1], fragment: m[2] });
});
if (expected.length === 0) {
  console.error("FAIL: src/type-errors.ts announces no error");
  process.exit(1);
}

fs.writeFileSync(copy, lines.map((l) => (DIRECTIVE.test(l) ? l.replace("@ts-expect-error", "(expect-error removed)") : l)).join("\n"));
let result;
try {
  const tsc = path.join(root, "node_modules/typescript/bin/tsc");
  result = spawnSync(process.execPath, [tsc, "--noEmit", "--pretty", "false", "-p", "tsconfig.negative.json"], {
    cwd: root,
    encoding: "utf8",
  });
} finally {
  fs.rmSync(copy, { force: true });
}
if (result.error) throw result.error;
const output = `${result.stdout}${result.stderr}`;

// `file(line,col): error TSxxxx: message`, then its elaboration on indented lines.
const diagnostics = [];
for (const line of output.split("\n")) {
  const m = /^(.+?)\((\d+),(\d+)\): error (TS\d+): (.*)$/.exec(line);
  if (m) diagnostics.push({ file: m[1], line: Number(m[2]), col: Number(m[3]), code: m[4], text: m[5] });
  else if (diagnostics.length && /^\s/.test(line)) diagnostics[diagnostics.length - 1].text += `\n${line}`;
  else if (line.trim()) diagnostics.push({ file: "?", line: 0, col: 0, code: "?", text: line });
}

const problems = [];
if (result.status === 0) problems.push("tsc passed the copy without the @ts-expect-error comments");
const used = new Set();
for (const want of expected) {
  const hit = diagnostics.findIndex(
    (d, k) =>
      !used.has(k) &&
      d.file === copyRel &&
      d.line === want.line &&
      d.code === want.code &&
      (!want.fragment || d.text.includes(want.fragment)),
  );
  if (hit < 0) {
    const there = diagnostics.filter((d) => d.file === copyRel && d.line === want.line);
    problems.push(
      `missing: line ${want.line} ${want.code}${want.fragment ? ` containing ${JSON.stringify(want.fragment)}` : ""}` +
        (there.length ? ` (tsc said there: ${there.map((d) => `${d.code} ${d.text.split("\n")[0]}`).join("; ")})` : " (tsc said nothing there)"),
    );
  } else {
    used.add(hit);
    const d = diagnostics[hit];
    console.log(`  fails as expected: ${copyRel}(${d.line},${d.col}): error ${d.code}: ${d.text.split("\n")[0].slice(0, 150)}`);
  }
}
diagnostics.forEach((d, k) => {
  if (!used.has(k)) problems.push(`unexpected: ${d.file}(${d.line},${d.col}): ${d.code} ${d.text.split("\n")[0]}`);
});

if (problems.length) {
  console.error(`FAIL: the negative type check (tsc exit ${result.status}):`);
  for (const p of problems) console.error(`  ${p}`);
  console.error("--- tsc output ---");
  console.error(output);
  process.exit(1);
}
console.log(`negative type check: tsc exit ${result.status}, all ${expected.length} announced errors and no other`);
