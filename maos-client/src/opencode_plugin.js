// maos-opencode-plugin 1: maos's plugin for OpenCode, written by `maos install-hooks --opencode`
// (remove it with `maos uninstall-hooks --opencode`; edits are overwritten by the next install).
// Each OpenCode event maos needs goes to `maos hook --cli opencode` as one JSON object on stdin,
// and its answer comes back on stdout: a denial (thrown: OpenCode gives the model the reason as
// the tool's error), context for the model, or a message for the person. If maos is missing,
// fails or is slow, the tool runs and the person is told, unless MAOS_HOOK_FAIL=closed.
import { spawn, spawnSync } from "node:child_process";

const MAOS = "maos";
const CLOSED = (process.env.MAOS_HOOK_FAIL || "").toLowerCase() === "closed";
// `maos hook` keeps to MAOS_HOOK_TIMEOUT_MS (5 s by default) itself; the margin is its start.
const BUDGET = (Number(process.env.MAOS_HOOK_TIMEOUT_MS) || 5000) + 2000;
// The tools whose calls maos checks (the others need no lock).
const CHECKED = new Set(["write", "edit", "multiedit", "apply_patch", "patch", "bash", "task"]);
const RUN = process.argv.includes("run");

export const Maos = async ({ client, directory }) => {
  const sessions = new Map(); // id -> { parent, agent, started, briefing, context }
  const queues = new Map(); // root session id -> the promise of its last call

  const tell = (message) => {
    if (RUN) process.stderr.write(`${message}\n`);
    else client?.tui?.showToast?.({ body: { message, variant: "warning" } })?.catch?.(() => {});
  };
  const session = (id) => {
    if (!sessions.has(id)) sessions.set(id, { parent: null, agent: null, started: false });
    return sessions.get(id);
  };
  // The window's session and, inside a subagent's child session, the subagent.
  const who = (id) => {
    let root = id;
    for (let i = 0; i < 16 && sessions.get(root)?.parent; i++) root = sessions.get(root).parent;
    if (root === id) return { session_id: id };
    return { session_id: root, agent_id: id, agent_type: sessions.get(id)?.agent || "subagent" };
  };

  const run = (payload) =>
    new Promise((resolve) => {
      let child;
      let out = "";
      let err = "";
      let done = false;
      const finish = (r) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(r);
      };
      const timer = setTimeout(() => {
        try { child?.kill("SIGKILL"); } catch {}
        finish({ failed: `\`maos hook\` gave no answer within ${BUDGET} ms` });
      }, BUDGET);
      try {
        child = spawn(MAOS, ["hook", "--cli", "opencode"], { cwd: directory, stdio: ["pipe", "pipe", "pipe"] });
      } catch (e) {
        return finish({ failed: `cannot run \`${MAOS} hook\` (${e?.message || e})` });
      }
      child.on("error", (e) =>
        finish({ failed: e?.code === "ENOENT" ? `\`${MAOS}\` is not on PATH` : `cannot run \`${MAOS} hook\` (${e?.message || e})` }));
      child.stdout.on("data", (d) => { if (out.length < 1 << 20) out += d; });
      child.stderr.on("data", (d) => { if (err.length < 1 << 16) err += d; });
      child.stdin.on("error", () => {});
      child.on("close", (code) => {
        if (code !== 0) return finish({ failed: err.trim().split("\n")[0] || `\`maos hook\` exited with ${code}` });
        try {
          finish({ answer: out.trim() ? JSON.parse(out) : {} });
        } catch {
          finish({ failed: "`maos hook`'s answer is not JSON" });
        }
      });
      child.stdin.end(JSON.stringify(payload));
    });

  // One call at a time per window, in the order OpenCode reported them.
  const call = (id, event, fields = {}) => {
    const payload = { hook_event_name: event, ...who(id), cwd: directory, ...fields };
    const key = payload.session_id;
    const next = (queues.get(key) || Promise.resolve()).then(() => run(payload));
    queues.set(key, next.catch(() => {}));
    return next.then((r) => {
      if (r.failed) return { failed: `maos: ${r.failed}` };
      if (r.answer?.message) tell(r.answer.message);
      return r.answer || {};
    });
  };
  // The window's start (before its first prompt or tool): the briefing is for its whole session.
  const start = async (id) => {
    const s = session(id);
    if (s.started || s.parent) return;
    s.started = true;
    const a = await call(id, "SessionStart", { source: "startup" });
    if (a.failed) tell(`${a.failed}; this window is not recorded`);
    if (a.context) s.briefing = a.context;
  };

  process.on("exit", () => {
    // The process is going: each window's end, within about a second and a half in all.
    const until = Date.now() + 1500;
    for (const [id, s] of sessions) {
      const left = until - Date.now();
      if (!s.started || s.ended || left <= 0) continue;
      const payload = { hook_event_name: "SessionEnd", session_id: id, cwd: directory, reason: "exit" };
      try {
        spawnSync(MAOS, ["hook", "--cli", "opencode"], { input: JSON.stringify(payload), timeout: left, stdio: ["pipe", "ignore", "ignore"] });
      } catch {}
    }
  });

  return {
    event: async ({ event }) => {
      const p = event?.properties || {};
      if (event?.type === "session.created" && p.info?.id) {
        const s = session(p.info.id);
        s.parent = p.info.parentID || null;
        s.agent = p.info.agent || null;
        if (s.parent) await call(p.info.id, "SubagentStart");
      } else if (event?.type === "session.idle" && p.sessionID) {
        const s = session(p.sessionID);
        if (s.parent) await call(p.sessionID, "SubagentStop");
        else if (s.started) await call(p.sessionID, "Stop");
      } else if (event?.type === "session.deleted" && p.info?.id) {
        const s = session(p.info.id);
        if (s.started && !s.parent && !s.ended) {
          s.ended = true;
          await call(p.info.id, "SessionEnd", { reason: "deleted" });
        }
      }
    },
    "chat.message": async (input, output) => {
      const id = input?.sessionID;
      if (!id || session(id).parent) return;
      await start(id);
      const prompt = (output?.parts || [])
        .filter((p) => p?.type === "text" && !p.synthetic && typeof p.text === "string")
        .map((p) => p.text)
        .join("\n");
      const a = await call(id, "UserPromptSubmit", { prompt });
      session(id).context = a.context || null;
    },
    "experimental.chat.system.transform": async (input, output) => {
      const s = input?.sessionID && sessions.get(input.sessionID);
      if (!s || !Array.isArray(output?.system)) return;
      for (const text of [s.briefing, s.context]) if (text) output.system.push(text);
    },
    "tool.execute.before": async (input, output) => {
      if (!CHECKED.has(input?.tool) || !input.sessionID) return;
      await start(input.sessionID);
      const a = await call(input.sessionID, "PreToolUse", {
        tool_name: input.tool,
        tool_input: output?.args || {},
        tool_use_id: input.callID,
      });
      if (a.decision === "deny") throw new Error(a.reason || "refused by maos");
      if (a.failed) {
        if (CLOSED) throw new Error(`${a.failed}, and MAOS_HOOK_FAIL=closed refuses the call; retry once \`maos daemon status\` works`);
        tell(`${a.failed}; file locks are not enforced for this call`);
      }
    },
    "tool.execute.after": async (input, output) => {
      if (!CHECKED.has(input?.tool) || !input.sessionID) return;
      const response = input.tool === "task" ? { agentId: output?.metadata?.sessionId } : {};
      const a = await call(input.sessionID, "PostToolUse", {
        tool_name: input.tool,
        tool_input: input.args || {},
        tool_use_id: input.callID,
        tool_response: response,
      });
      if (a.context && typeof output?.output === "string") output.output += `\n\n${a.context}`;
    },
  };
};
