CREATE TABLE containers (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL UNIQUE,
	state      TEXT NOT NULL,
	created    INTEGER NOT NULL,
	data       BLOB NOT NULL
);

CREATE TABLE exec_sessions (
	id           TEXT PRIMARY KEY,
	container_id TEXT NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
	created      INTEGER NOT NULL,
	data         BLOB NOT NULL
);
CREATE INDEX exec_sessions_container ON exec_sessions(container_id);

CREATE TABLE events (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	time_ns    INTEGER NOT NULL,
	type       TEXT NOT NULL,
	action     TEXT NOT NULL,
	actor_id   TEXT NOT NULL,
	name       TEXT NOT NULL,
	data       BLOB NOT NULL
);
CREATE INDEX events_time ON events(time_ns);
