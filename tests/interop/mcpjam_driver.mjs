// MCPJam's SDK (`@mcpjam/sdk`, its `MCPClientManager`) against an mcptasks server, driven as its
// users' tests drive it: connect, list tools, `executeTool`, an elicitation callback or handler, a
// progress handler. No model.
//
//   node mcpjam_driver.mjs URL INSTALL_DIR
//
// INSTALL_DIR is the npm prefix holding the SDK (`INSTALL_DIR/node_modules/@mcpjam/sdk`). Prints
// one JSON line: what each case observed. A case that throws records the error's JSON-RPC code,
// message and data, or its stack when it has no code.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const url = process.argv[2];
const installDir = resolve(process.argv[3]);
const modules = join(installDir, "node_modules");
const requireFromInstall = createRequire(join(installDir, "package.json"));
const { MCPClientManager } = await import(pathToFileURL(requireFromInstall.resolve("@mcpjam/sdk")).href);

const SERVER = "jam";
const TASK_TOOLS = [
  "greet",
  "slow_compute",
  "failing_job",
  "protocol_error_job",
  "confirm_delete",
  "multi_input",
  "test_tool_with_task",
];

function versionOf(name) {
  return JSON.parse(readFileSync(join(modules, name, "package.json"), "utf8")).version;
}

// What a user's elicitation handler answers: a name, "go", and "delete" for every file but keep.txt.
function answer(message) {
  if (message === "Your name?") return { action: "accept", content: { name: "MCPJam" } };
  if (message === "Go ahead?") return { action: "accept", content: { confirm: true } };
  const file = /^Delete (.+)\?$/.exec(message);
  if (file) return { action: "accept", content: { confirm: file[1] !== "keep.txt" } };
  return { action: "decline" };
}

async function attempt(run) {
  try {
    return await run();
  } catch (error) {
    if (error !== null && typeof error === "object" && typeof error.code === "number") {
      return { error: { code: error.code, message: error.message, data: error.data ?? null } };
    }
    return { trace: String(error?.stack ?? error) };
  }
}

// One manager, one server, as a user's test sets it up. `elicitation`: "callback" sets an
// elicitation callback before connecting (the manager then declares `elicitation`); "handler"
// declares `elicitation` in the server's config and sets a handler for it once connected (it needs
// a registered server). `pin`: the config's `mcpProtocolVersion`.
async function session({ elicitation, pin }) {
  const sent = [];
  let progress = [];
  let asked = [];
  const manager = new MCPClientManager(
    {},
    {
      defaultClientName: "mcpjam-interop",
      rpcLogger: ({ direction, message }) => {
        if (direction === "send" && typeof message.method === "string") sent.push(message);
      },
      progressHandler: ({ progress: count, total, message }) =>
        progress.push({ progress: count, total: total ?? null, message: message ?? null }),
    },
  );
  const config = { url };
  if (pin) config.mcpProtocolVersion = pin;
  if (elicitation === "callback") {
    manager.setElicitationCallback(async (request) => {
      asked.push(request.message);
      return answer(request.message);
    });
  }
  if (elicitation === "handler") config.capabilities = { elicitation: {} };
  await manager.connectToServer(SERVER, config);
  if (elicitation === "handler") {
    manager.setElicitationHandler(SERVER, async (params) => {
      asked.push(params.message);
      return answer(params.message);
    });
  }

  async function call(tool, args) {
    progress = [];
    asked = [];
    const outcome = await attempt(async () => {
      const result = await manager.executeTool(SERVER, tool, args);
      const texts = (result.content ?? []).filter((block) => block.type === "text").map((block) => block.text);
      return { texts, isError: result.isError ?? false, resultType: result.resultType ?? null };
    });
    return { ...outcome, asked, progress };
  }

  const info = manager.getInitializationInfo(SERVER);
  const listed = await manager.listTools(SERVER);
  const tools = Object.fromEntries(
    listed.tools
      .filter((tool) => TASK_TOOLS.includes(tool.name))
      .map((tool) => [tool.name, tool._meta?.["io.modelcontextprotocol/tasks"]?.taskSupport ?? null]),
  );
  return {
    manager,
    call,
    observed: {
      // Negotiated at initialize; on 2026-07-28 the version each request names in its _meta.
      protocolVersion:
        info.protocolVersion ?? sent[0]?.params?._meta?.["io.modelcontextprotocol/protocolVersion"] ?? null,
      serverExtensions: Object.keys(info.serverCapabilities?.extensions ?? {}),
      tools,
    },
    // What the client declared on the wire: at initialize (2025-11-25) or in each request's _meta.
    declared() {
      const initialize = sent.find((message) => message.method === "initialize");
      if (initialize) return initialize.params.capabilities;
      const toolCall = sent.find((message) => message.method === "tools/call");
      return toolCall?.params?._meta?.["io.modelcontextprotocol/clientCapabilities"] ?? null;
    },
    methods: () => [...new Set(sent.map((message) => message.method))].sort(),
    // Whether every tools/call carried a progressToken (the manager has a progressHandler).
    progressTokens: () =>
      sent
        .filter((message) => message.method === "tools/call")
        .every((message) => message.params?._meta?.progressToken !== undefined),
  };
}

async function finish(s, cases) {
  await s.manager.disconnectAllServers();
  return { ...s.observed, declared: s.declared(), ...cases, methods: s.methods(), progressTokens: s.progressTokens() };
}

async function legacyWithCallback() {
  const s = await session({ elicitation: "callback" });
  const cases = {
    quick: await s.call("slow_compute", { seconds: 0.2, label: "quick" }),
    statuses: await s.call("slow_compute", { seconds: 1.0, label: "watch" }),
    required: await s.call("failing_job", {}),
    required_asking_first: await s.call("test_tool_with_task", {}),
    protocol_error: await s.call("protocol_error_job", {}),
    confirm: await s.call("confirm_delete", { filename: "a.txt" }),
    decline: await s.call("confirm_delete", { filename: "keep.txt" }),
    multi_input: await s.call("multi_input", {}),
  };
  return await finish(s, cases);
}

async function legacyWithHandler() {
  const s = await session({ elicitation: "handler" });
  const cases = { confirm: await s.call("confirm_delete", { filename: "d.txt" }) };
  return await finish(s, cases);
}

async function legacyWithoutElicitation() {
  const s = await session({});
  const cases = { confirm: await s.call("confirm_delete", { filename: "b.txt" }) };
  return await finish(s, cases);
}

async function modern() {
  const s = await session({ elicitation: "callback", pin: "2026-07-28" });
  const cases = {
    quick: await s.call("slow_compute", { seconds: 0.2, label: "quick" }),
    statuses: await s.call("slow_compute", { seconds: 1.0, label: "watch" }),
    required: await s.call("failing_job", {}),
    confirm: await s.call("confirm_delete", { filename: "c.txt" }),
  };
  return await finish(s, cases);
}

const results = {
  versions: {
    "@mcpjam/sdk": versionOf("@mcpjam/sdk"),
    "@modelcontextprotocol/client": versionOf("@modelcontextprotocol/client"),
    node: process.versions.node,
  },
  legacy: await attempt(legacyWithCallback),
  legacy_handler: await attempt(legacyWithHandler),
  legacy_without_elicitation: await attempt(legacyWithoutElicitation),
  modern: await attempt(modern),
};
console.log(JSON.stringify(results));
