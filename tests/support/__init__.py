"""Helpers the tests share: paired connections, scripted peers, test apps, CLI runners."""
