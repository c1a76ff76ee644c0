"""What MCP clients are given: the commands that connect them (:mod:`.commands`), their keys (:mod:`.keys`), and
their config entries (:mod:`.config`, :mod:`.install`), built from the one table of client facts (:mod:`.facts`)
by :mod:`.entries`, and written into their files by :mod:`.file` and :mod:`.jsonedit`."""
