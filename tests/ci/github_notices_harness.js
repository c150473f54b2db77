// Runs .github/notices/issues.js against a stood-in GitHub API: the issues it starts with come from STATE_FILE,
// what it did (every call, the issues after, the summary, a failure) is printed as JSON; with KEEP_STATE=1 the
// issues after are written back to STATE_FILE, so that publish after publish runs against one stood-in repository
// (tools/acceptance/github_standin.py).
"use strict";
const fs = require("fs");
const issues = JSON.parse(fs.readFileSync(process.env.STATE_FILE, "utf8"));
const calls = [];
let next = Math.max(0, ...issues.map((i) => i.number)) + 1;
const github = {
  paginate: async (method, params) => (await method(params)).data,
  rest: { issues: {
    listForRepo: async (params) => {
      calls.push(["list", params]);
      return { data: issues.filter((i) => (i.labels || []).includes(params.labels)) };
    },
    create: async (params) => {
      calls.push(["create", params]);
      const issue = { number: next++, title: params.title, body: params.body, state: "open", labels: params.labels,
        user: { login: "github-actions[bot]" }, owner: params.owner, repo: params.repo };
      issues.push(issue);
      return { data: issue };
    },
    update: async (params) => {
      calls.push(["update", params]);
      const issue = issues.find((i) => i.number === params.issue_number);
      for (const key of ["title", "body", "state", "state_reason"]) if (key in params) issue[key] = params[key];
      return { data: issue };
    },
    createComment: async (params) => {
      calls.push(["comment", params]);
      const issue = issues.find((i) => i.number === params.issue_number);
      issue.comments = [...(issue.comments || []), params.body];
      return { data: {} };
    },
  } },
};
let summary = "";
let failed = null;
const core = {
  summary: { addHeading(t) { summary += `## ${t}\n`; return this; }, addRaw(t) { summary += t; return this; },
    async write() { return this; } },
  setFailed(message) { failed = message; },
};
const context = { repo: { owner: "owner", repo: "repo" } };
require(process.env.SCRIPT).run({ github, context, core }).then((result) => {
  if (process.env.KEEP_STATE === "1") fs.writeFileSync(process.env.STATE_FILE, JSON.stringify(issues, null, 1));
  process.stdout.write(JSON.stringify({ result, calls, issues, summary, failed }));
}, (error) => { process.stderr.write(String(error.stack)); process.exit(3); });
