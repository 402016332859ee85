"""Media in: attachments fetched with caps, stored in the person's tree, turned into turn content."""
