"""pytest configuration of the evidence tests (docs/audit.md): the `slow` marker."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: renders with headless chromium (ctest label slow)")
