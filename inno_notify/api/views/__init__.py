"""Thin request handlers: parse and validate the request, call the store, serialize the answer."""
