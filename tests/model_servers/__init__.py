"""Small local servers that speak the model APIs the real agent CLIs call, scripted per test.

Each server answers every model call with the next `Turn` of its `Script` (the last one repeats): an
answer's text, or a tool call the CLI should run, and the usage to report. `serve` runs one on a free
port of 127.0.0.1 for the length of a `with` block. The APIs:

- `anthropic.app`: Anthropic Messages (`POST /v1/messages`, SSE when `stream`), for Claude Code;
- `openai.app`: OpenAI Responses (`POST /v1/responses`, SSE) for Codex, and Chat Completions
  (`POST /v1/chat/completions`, SSE) for aider through litellm;
- `gemini.app`: Gemini `generateContent` and `streamGenerateContent?alt=sse`, for Gemini CLI.
"""

from model_servers import anthropic, gemini, openai
from model_servers.core import Script, Served, Turn, serve

__all__ = ["Script", "Served", "Turn", "anthropic", "gemini", "openai", "serve"]
