"""The console for the people runs wait on: its views, starting with the definition graph."""
