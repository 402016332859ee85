"""The web chat page (``static/``), served by the websocket adapter; package data only, no code."""
