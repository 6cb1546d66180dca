"""Running a federation: the server driver, the client session, the in-process engine, the wire and the ledgers."""
