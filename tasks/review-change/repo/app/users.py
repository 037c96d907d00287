"""User listing for the admin API (unchanged by CHANGE-77)."""

USERS = ["alice", "bob"]


def list_users() -> list[str]:
    return list(USERS)
