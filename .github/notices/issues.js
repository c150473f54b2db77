// The history's notices as GitHub issues, run by actions/github-script in the history workflow's `notices` job.
//
// It runs none of the project's code and trusts nothing of the notices file but its shape: the file is checked
// against notices.schema.json (read from the default branch's checkout, never from the artifact) by the validator
// below, which knows the few keywords that schema uses and refuses a schema with any other. Every field of a notice
// reaches an issue through a fixed template, each character that Markdown or HTML could read as markup (a mention,
// a link, a tag, a code fence, a table) written as an HTML entity. Links are built here: the commit's from this
// repository and the hash, the graph's from the site's address and the schema-checked relative URL.
//
// One issue per filed notice, found again by the hidden marker `<!-- sgemm-notice: ID -->` on its first line in
// issues that this workflow's bot opened with the label below: updated rather than duplicated (a notice keeps its id
// when its boundary moves), closed when the notice is closed, dismissed or gone, reopened when it opens again. A
// candidate that is not filed yet (seen at one publish, not confirmed) opens none. An open issue of the bot whose
// notice is absent from the file is closed as not planned, "no longer seen": no issue is left orphaned.
"use strict";

const fs = require("fs");

const LABEL = "sgemm-regression";
const BOT = "github-actions[bot]";
const MARKER = /^<!-- sgemm-notice: ([A-Za-z0-9._-]{1,200}) -->$/;
const OPEN = new Set(["candidate", "regression", "environment"]);
const NOT_PLANNED = new Set(["dismissed", "gone"]);
const MAX_FILE_BYTES = 5 * 1024 * 1024;
const SITE_URL = /^https:\/\/[A-Za-z0-9.-]+(:[0-9]+)?(\/[A-Za-z0-9._~\/-]*)?$/;
const KEYWORDS = new Set(["$schema", "$id", "title", "type", "additionalProperties", "required", "properties",
  "items", "minItems", "maxItems", "enum", "const", "pattern", "maxLength", "minimum", "maximum",
  "exclusiveMinimum", "$defs", "$ref"]);

// --- the schema ------------------------------------------------------------------------------------------------

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function checkSchema(node, where) {
  if (typeof node !== "object" || node === null || Array.isArray(node)) throw new Error(`schema ${where}: not an object`);
  for (const key of Object.keys(node)) {
    if (!KEYWORDS.has(key)) throw new Error(`schema ${where}: keyword ${key} is not one this validator knows`);
  }
  for (const group of ["properties", "$defs"]) {
    for (const [name, child] of Object.entries(node[group] || {})) checkSchema(child, `${where}/${group}/${name}`);
  }
  if (node.items) checkSchema(node.items, `${where}/items`);
}

function validate(value, schema, root, path, problems) {
  if (problems.length >= 20) return;
  if (schema.$ref) {
    const name = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(schema.$ref);
    if (!name || !root.$defs || !root.$defs[name[1]]) throw new Error(`schema: cannot resolve ${schema.$ref}`);
    validate(value, root.$defs[name[1]], root, path, problems);
    return;
  }
  const say = (why) => problems.push(`${path || "(top)"}: ${why}`);
  const kind = typeOf(value);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.includes(kind) && !(kind === "integer" && types.includes("number"))) {
      say(`expected ${types.join(" or ")}, found ${kind}`);
      return;
    }
  }
  if ("const" in schema && value !== schema.const) say(`must be ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.includes(value)) say(`must be one of ${schema.enum.join(", ")}`);
  if (kind === "string") {
    if (schema.maxLength !== undefined && value.length > schema.maxLength) say(`longer than ${schema.maxLength}`);
    if (schema.pattern && !new RegExp(schema.pattern, "u").test(value)) say("does not match its pattern");
  }
  if (kind === "number" || kind === "integer") {
    if (!Number.isFinite(value)) say("not a finite number");
    if (schema.minimum !== undefined && value < schema.minimum) say(`below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum) say(`above ${schema.maximum}`);
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) say(`not above ${schema.exclusiveMinimum}`);
  }
  if (kind === "array") {
    if (schema.minItems !== undefined && value.length < schema.minItems) say(`fewer than ${schema.minItems} items`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) say(`more than ${schema.maxItems} items`);
    if (schema.items) value.forEach((item, i) => validate(item, schema.items, root, `${path}[${i}]`, problems));
  }
  if (kind === "object") {
    for (const key of schema.required || []) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) say(`lacks ${key}`);
    }
    for (const [key, item] of Object.entries(value)) {
      const known = schema.properties && Object.prototype.hasOwnProperty.call(schema.properties, key);
      if (known) validate(item, schema.properties[key], root, `${path}.${key}`, problems);
      else if (schema.additionalProperties === false) say(`unexpected field ${JSON.stringify(key).slice(0, 60)}`);
    }
  }
}

function readNotices(noticesPath, schemaPath) {
  const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
  checkSchema(schema, "#");
  const size = fs.statSync(noticesPath).size;
  if (size > MAX_FILE_BYTES) return { problems: [`the notices file is ${size} bytes, more than ${MAX_FILE_BYTES}`] };
  let document;
  try {
    document = JSON.parse(fs.readFileSync(noticesPath, "utf8"));
  } catch (error) {
    return { problems: ["the notices file is not valid JSON"] };
  }
  const problems = [];
  validate(document, schema, schema, "", problems);
  if (!problems.length) {
    const seen = new Set();
    for (const notice of document.notices) {
      if (seen.has(notice.id)) problems.push(`notice ${notice.id}: its id is there twice`);
      seen.add(notice.id);
    }
  }
  return { document, problems };
}

// --- the templates -----------------------------------------------------------------------------------------------

// Letters, digits, space and a few marks that Markdown reads as text; everything else as an entity.
function text(value) {
  return String(value).replace(/[^A-Za-z0-9 .,:\/-]/gu, (c) => `&#${c.codePointAt(0)};`);
}

function number(value, digits) {
  return value === null || value === undefined ? "not recorded" : Number(value).toFixed(digits);
}

function marker(id) {
  return `<!-- sgemm-notice: ${id} -->`;
}

function title(notice) {
  const kernels = notice.kernels.join(", ");
  const range = notice.first_bad ? notice.bad.slice(0, 12)
    : `${notice.last_good.slice(0, 12)}..${notice.bad.slice(0, 12)}`;
  return `${notice.state === "environment" ? "Environment change" : "Regression"}: ${kernels} on ${notice.gpu_model}`
    + ` at ${range}`;
}

function body(notice, repo, serverUrl, siteUrl) {
  const commit = (sha) => `[${sha.slice(0, 12)}](${serverUrl}/${repo.owner}/${repo.repo}/commit/${sha})`;
  const graph = (url) => (siteUrl ? ` ([graph](${siteUrl.replace(/\/?$/, "/")}${url}))` : "");
  const lines = [
    marker(notice.id),
    `State: ${notice.state === "gone" ? "no longer seen" : text(notice.state)}, on ${text(notice.gpu_model)} `
      + `(machine ${text(notice.machine)}); seen at ${notice.publishes} publishes in a row`
      + `${notice.seen ? "" : ", not at the newest"}`,
    "",
    notice.first_bad
      ? `First bad commit: ${commit(notice.first_bad)}; last good: ${commit(notice.last_good)}.`
      : `Between ${commit(notice.last_good)} (last good) and ${commit(notice.bad)} (first measured slow): `
        + `${notice.commits_between} commits not measured.`,
  ];
  if (notice.environment.length) lines.push("", `The box changed across the step: ${text(notice.environment.join("; "))}.`);
  lines.push("", "| case | size | ratio (95%) | SM clock before, after | power before, after | confirmation |",
    "|---|---:|---:|---:|---:|---|");
  for (const c of notice.cases) {
    const confirmed = c.confirmation
      ? `${text(c.confirmation.verdict)} ${number(c.confirmation.ratio, 4)} (${number(c.confirmation.interval[0], 4)}`
        + `-${number(c.confirmation.interval[1], 4)})`
      : "not yet";
    lines.push(`| ${text(c.case)}${graph(c.graph_url)} | ${text(c.shape.join("x"))} | ${number(c.ratio, 4)} `
      + `(${number(c.interval[0], 4)}-${number(c.interval[1], 4)}) | ${number(c.before.sm_clock_mhz, 0)}, `
      + `${number(c.after.sm_clock_mhz, 0)} MHz | ${number(c.before.power_w, 0)}, ${number(c.after.power_w, 0)} W `
      + `| ${confirmed} |`);
  }
  if (notice.bisect) {
    const b = notice.bisect;
    lines.push("", `Bisect: ${text(b.verdict)}, first bad ${b.first_bad ? commit(b.first_bad) : "not found"}`
      + `${b.builds === null ? "" : `, ${b.builds} builds`}${b.wall_s === null ? "" : `, ${number(b.wall_s, 0)} s`}.`);
  }
  lines.push("", `Notice ${text(notice.id)}, kept up to date by the history workflow.`);
  return lines.join("\n");
}

// Each case's paired confirmation in a word, for the job's summary.
function confirmations(notice) {
  const seen = (notice.cases || []).filter((c) => c.confirmation)
    .map((c) => `${text(c.case)} ${text(c.confirmation.verdict)}`);
  return seen.length ? seen.join(", ") : "none";
}

// --- the issues ----------------------------------------------------------------------------------------------------

async function ownIssues(github, repo) {
  const issues = await github.paginate(github.rest.issues.listForRepo,
    { ...repo, labels: LABEL, state: "all", per_page: 100 });
  const byId = new Map();
  for (const issue of issues) {
    if (issue.pull_request || !issue.user || issue.user.login !== BOT) continue;
    const found = MARKER.exec(String(issue.body || "").split("\n", 1)[0]);
    if (found && !byId.has(found[1])) byId.set(found[1], issue);
  }
  return byId;
}

async function run({ github, context, core }, env = process.env) {
  const siteUrl = env.SITE_URL && SITE_URL.test(env.SITE_URL) ? env.SITE_URL : "";
  const { document, problems } = readNotices(env.NOTICES_FILE, env.SCHEMA_FILE);
  if (problems.length) {
    await core.summary.addHeading("Regression notices refused", 2)
      .addRaw(`The notices file does not match its schema; no issue was touched.\n\n${problems.map((p) => `- ${text(p)}`).join("\n")}\n`)
      .write();
    core.setFailed(`the notices file does not match its schema: ${problems.length} problems`);
    return { refused: problems };
  }
  const repo = { owner: context.repo.owner, repo: context.repo.repo };
  const serverUrl = env.GITHUB_SERVER_URL || "https://github.com";
  const existing = await ownIssues(github, repo);
  const done = [];
  for (const notice of document.notices) {
    const wanted = { title: title(notice), body: body(notice, repo, serverUrl, siteUrl) };
    const open = OPEN.has(notice.state);
    const issue = existing.get(notice.id);
    if (!issue) {
      if (!open || !notice.filed) continue;
      const made = await github.rest.issues.create({ ...repo, ...wanted, labels: [LABEL] });
      done.push([notice, "opened", made.data.number]);
      continue;
    }
    const state = open ? "open" : "closed";
    const was = issue.state;
    if (issue.title === wanted.title && issue.body === wanted.body && issue.state === state) {
      done.push([notice, "unchanged", issue.number]);
      continue;
    }
    await github.rest.issues.update({ ...repo, issue_number: issue.number, ...wanted, state,
      ...(open ? {} : { state_reason: NOT_PLANNED.has(notice.state) ? "not_planned" : "completed" }) });
    done.push([notice, was === state ? "updated" : (open ? "reopened" : "closed"), issue.number]);
  }
  // The bot's open issues whose notice the file no longer holds: closed, saying why, never left open for ever.
  const listed = new Set(document.notices.map((n) => n.id));
  for (const [id, issue] of existing) {
    if (listed.has(id) || issue.state !== "open") continue;
    await github.rest.issues.createComment({ ...repo, issue_number: issue.number,
      body: "No longer seen: the newest notices file holds no notice of this id, so this issue is closed." });
    await github.rest.issues.update({ ...repo, issue_number: issue.number, state: "closed",
      state_reason: "not_planned" });
    done.push([{ id, kernels: [], gpu_model: "", state: "gone" }, "closed (no longer seen)", issue.number]);
  }
  const rows = done.map(([n, what, number]) => `| #${number} | ${text(n.kernels.join(", "))} | ${text(n.gpu_model)} `
    + `| ${text(n.state)} | ${what} | ${confirmations(n)} |`);
  await core.summary.addHeading("Regression notices", 2)
    .addRaw(`${document.notices.length} notices, ${done.filter((d) => d[1] !== "unchanged").length} issues changed.\n\n`)
    .addRaw(rows.length ? ["| issue | kernels | GPU | state | done | confirmations |", "|---|---|---|---|---|---|",
      ...rows].join("\n") + "\n" : "")
    .write();
  return { done: done.map(([n, what, number]) => ({ id: n.id, what, number })) };
}

module.exports = { run, readNotices, validate, text, body, title, marker, LABEL };
