"""The stdio bridge (``foldermind mcp``): relays a stdio MCP client's lines to the front door's HTTP endpoint
(:mod:`.relay`), through a transport that keeps each request's failure its own (:mod:`.transport`), to the URL and
token found again when they change (:mod:`.link`), each line judged first (:mod:`.stdio_lines`)."""
