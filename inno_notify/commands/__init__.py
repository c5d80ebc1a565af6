"""The one-shot commands (`check`, `digest`): each builds what it needs through the runtime's
builders, does its job once and returns what the CLI prints."""
