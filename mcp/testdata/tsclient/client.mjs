// Runs steps against an MCP endpoint with the official TypeScript SDK and
// prints one JSON line with what each step got. mcp/tsclient_test.go
// drives it against a real server.
//
// Usage: node client.mjs URL TOKEN STEPS_JSON
//   TOKEN: "" for none
//   STEPS_JSON: [{"op": "list"} | {"op": "call", "name": ..., "arguments": {...}}]
// Output: {"connected": true, "results": [...]} or {"connected": false, "error": ...}
// A step's result: list -> {"tools": [{name, description, inputSchema}]};
// call -> {"isError", "content", "structuredContent", "meta", "progress": [...]}
// or {"error": {"code", "message"}} for a JSON-RPC error.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, stepsJSON] = process.argv.slice(2);
const opts = token ? { requestInit: { headers: { Authorization: "Bearer " + token } } } : {};
const client = new Client({ name: "actionsledger-tsclient", version: "1.0.0" });
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), opts));
} catch (e) {
  console.log(JSON.stringify({ connected: false, error: String(e && e.message ? e.message : e) }));
  process.exit(0);
}
const results = [];
for (const step of JSON.parse(stepsJSON)) {
  try {
    if (step.op === "list") {
      const tools = [];
      let cursor;
      do {
        const page = await client.listTools(cursor ? { cursor } : {});
        tools.push(...page.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })));
        cursor = page.nextCursor;
      } while (cursor);
      results.push({ tools });
    } else if (step.op === "call") {
      const progress = [];
      const r = await client.callTool({ name: step.name, arguments: step.arguments ?? {} }, undefined, {
        onprogress: (p) => progress.push(p),
        timeout: 120000,
        resetTimeoutOnProgress: true,
      });
      results.push({ isError: !!r.isError, content: r.content, structuredContent: r.structuredContent, meta: r._meta, progress });
    } else {
      results.push({ error: { message: "unknown op " + step.op } });
    }
  } catch (e) {
    results.push({ error: { code: e.code, message: String(e.message) } });
  }
}
console.log(JSON.stringify({ connected: true, results }));
await client.close();
