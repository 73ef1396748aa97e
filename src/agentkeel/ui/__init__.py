"""Front ends: the CLI, the terminal UI, the web app, the SDK and batch runs. They use the public API."""
