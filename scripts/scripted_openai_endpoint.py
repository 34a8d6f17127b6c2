"""A scripted OpenAI-compatible chat endpoint for running an LLM client without a model.

Every `POST .../chat/completions` is answered with one assistant message whose content is the
JSON object `{}`, so a client's model path runs (requests, parsing, fallbacks) and the client
decides with its own defaults wherever the model would have. Used to run the reference
repository's `inference.py` in its model mode against our server (docs/controlbench-wire.md).

Usage: python3 scripts/scripted_openai_endpoint.py [PORT]   (binds 127.0.0.1, default 8501)
The number of calls answered is written to stderr, one line per call.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = "{}"


class ScriptedChat(BaseHTTPRequestHandler):
    calls = 0

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            body = {}
        ScriptedChat.calls += 1
        reply = {
            "id": f"scripted-{ScriptedChat.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": ANSWER},
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 1, "total_tokens": 1},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        sys.stderr.write(f"call {ScriptedChat.calls}\n")
        sys.stderr.flush()


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8501
    ThreadingHTTPServer(("127.0.0.1", port), ScriptedChat).serve_forever()
