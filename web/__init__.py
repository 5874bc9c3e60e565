"""mam.web: the dashboard, a thin face over the same reader and publisher API the CLI uses.

`mam dashboard` and `mam up --dashboard` serve one page (`static/`) and one
event stream. The server subscribes to the workspace's topics with mam's own
client (`hub.Hub`), verifies states like every reader (`mam.contract.signing`), and
pushes what changes to the page; cancel goes through `Publisher`.
"""
