"""Pure logic on plain dataclasses: no I/O, no clock, no framework. Time is passed in."""
