"""A driver of the official MCP Python SDK (`mcp` on PyPI) for maos's tests.

It starts the server given on the command line over stdio (through the SDK's own stdio
client), then reads one JSON command a line on stdin and writes one JSON answer a line on
stdout, so that the Rust test can check maos's own view between calls:

  {"op": "list_tools"}                          -> {"tools": [{name, description, inputSchema}]}
  {"op": "call", "tool": T, "args": {...}, "meta": {...}?, "timeout": S?}
                                                -> {"is_error": bool, "text": str}
                                                   or {"rpc_error": str} (a JSON-RPC error;
                                                   after S seconds the SDK gives the call up
                                                   and sends notifications/cancelled)
  {"op": "list_resources"}                      -> {"resources": [uri, ...]}
  {"op": "read", "uri": U}                      -> {"text": str} or {"rpc_error": str}
  {"op": "info"}                                -> {"name": ..., "version": ..., "instructions": ...}
  {"op": "hook", "cli": C?, "input": {...}}     -> {"code": int, "stdout": str, "stderr": str}
      runs `maos hook [--cli C]` as a child of this process, as the agent CLI that runs the
      server would (so both see the same CLI process)

Usage: mcp_client.py COMMAND [ARGS...]   (the environment is passed to the server)
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError as McpError


def field(obj, *names):
    """A field of an SDK object, by its 2.x (snake_case) or 1.x (camelCase) name."""
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return None


def text_of(result):
    parts = []
    for c in result.content:
        t = getattr(c, "text", None)
        if t is not None:
            parts.append(t)
    return "\n".join(parts)


async def serve(session, init):
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "list_tools":
                tools = await session.list_tools()
                out = {
                    "tools": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": field(t, "input_schema", "inputSchema"),
                        }
                        for t in tools.tools
                    ]
                }
            elif op == "call":
                kwargs = {}
                if cmd.get("meta") is not None:
                    kwargs["meta"] = cmd["meta"]
                if cmd.get("timeout") is not None:
                    kwargs["read_timeout_seconds"] = float(cmd["timeout"])
                result = await session.call_tool(cmd["tool"], cmd.get("args"), **kwargs)
                out = {"is_error": bool(field(result, "is_error", "isError")), "text": text_of(result)}
            elif op == "list_resources":
                res = await session.list_resources()
                out = {"resources": [str(r.uri) for r in res.resources]}
            elif op == "read":
                res = await session.read_resource(cmd["uri"])
                out = {"text": "\n".join(getattr(c, "text", "") for c in res.contents)}
            elif op == "hook":
                argv = [sys.argv[1], "hook"]
                if cmd.get("cli"):
                    argv += ["--cli", cmd["cli"]]
                proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                got, err = await proc.communicate(json.dumps(cmd["input"]).encode())
                out = {
                    "code": proc.returncode,
                    "stdout": got.decode(),
                    "stderr": err.decode(),
                }
            elif op == "info":
                info = field(init, "server_info", "serverInfo")
                out = {
                    "name": info.name,
                    "version": info.version,
                    "instructions": init.instructions,
                    "protocol": str(field(init, "protocol_version", "protocolVersion")),
                }
            else:
                out = {"driver_error": f"unknown op {op}"}
        except McpError as e:
            out = {"rpc_error": str(e.error.message)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


async def main():
    params = StdioServerParameters(
        command=sys.argv[1], args=sys.argv[2:], env=dict(os.environ)
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            sys.stdout.write(json.dumps({"ready": True}) + "\n")
            sys.stdout.flush()
            await serve(session, init)


if __name__ == "__main__":
    asyncio.run(main())
