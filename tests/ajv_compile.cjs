// Compile each JSON Schema file named on the command line with Ajv (draft 2020-12) under its default
// options, strict mode included, then again with ajv-formats added; print one JSON line per file.
// Run by tests/test_schema_ajv.py with NODE_PATH pointing at an `npm install ajv ajv-formats`.
"use strict";
const fs = require("node:fs");
const Ajv2020 = require("ajv/dist/2020").default;
const addFormats = require("ajv-formats").default;

for (const path of process.argv.slice(2)) {
  const schema = JSON.parse(fs.readFileSync(path, "utf8"));
  const result = { path, version: require("ajv/package.json").version };
  for (const [name, make] of [
    ["default", () => new Ajv2020()],
    ["formats", () => { const ajv = new Ajv2020(); addFormats(ajv); return ajv; }],
  ]) {
    try {
      make().compile(schema);
      result[name] = "compiled";
    } catch (error) {
      result[name] = String(error.message);
    }
  }
  console.log(JSON.stringify(result));
}
