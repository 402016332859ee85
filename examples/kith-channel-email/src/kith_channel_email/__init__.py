"""kith's email channel, as a separate package: IMAP IDLE in, SMTP out (docs/channels.md#email)."""
