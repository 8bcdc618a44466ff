#!/usr/bin/env python3
"""A local OpenAI-compatible chat server for scripts/hot-symbols.sh (127.0.0.1 only).

Answers POST /v1/chat/completions, streamed (SSE) when the request asks for it: a call of
`read_file` on the first turn, then a `write_file`, then a final text. Prints its port on stdout.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply(messages):
    """The next assistant message for a conversation."""
    tool_turns = sum(1 for m in messages if m.get("role") == "tool")
    if tool_turns == 0:
        return {"tool_calls": [call("c1", "read_file", {"file_path": "greet.sh"})]}
    if tool_turns == 1:
        return {"tool_calls": [call("c2", "write_file", {"file_path": "NOTES.md", "content": "checked greet.sh\n"})]}
    return {"content": "Done: greet.sh read, NOTES.md written."}


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        message = reply(body.get("messages", []))
        finish = "tool_calls" if "tool_calls" in message else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if body.get("stream"):
            self.stream(message, finish, usage)
        else:
            self.send_json({"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
                            "choices": [{"index": 0, "finish_reason": finish,
                                         "message": {"role": "assistant", "content": message.get("content"), **message}}],
                            "usage": usage})

    def send_json(self, value):
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, message, finish, usage):
        delta = {"role": "assistant", "content": message.get("content")}
        if "tool_calls" in message:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(message["tool_calls"])]
        chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                  {"choices": [], "usage": usage}]
        data = "".join(f"data: {json.dumps(dict(c, id='x', object='chat.completion.chunk', created=0, model='m'))}\n\n"
                       for c in chunks) + "data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data.encode())))
        self.end_headers()
        self.wfile.write(data.encode())


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
