"""Adapters that plug bothy into agent and evaluation harnesses.

- :mod:`bothy.integrations.minisweagent`: mini-swe-agent's environment
  (``environment_class: bothy.integrations.minisweagent.BothyEnvironment``).
"""
