"""How an add ends short: refused (bad input or a pack we will not build: exit 2) or an
installer that failed (exit 1). Each is one line that says what happened and what to do."""


class Refused(Exception):
    pass


class InstallFailed(Exception):
    pass
