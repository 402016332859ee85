"""kith-plugin-weather: a sample kith plugin (see README.md and kith's docs/plugins.md)."""
