-- A state database made by kith at commit f490afa, before versioned migrations (tests/core/test_state_migrations.py):
-- a gateway served three turns (alice twice, bob once), alice made a /link code, the knowledge graph got two facts,
-- the access store a pairing request, an approval and an invite; writer, sleep-run, distill and retention progress,
-- a compaction and a watermark got a row each;
-- link_codes got the one row nothing ever read. Dumped with sqlite3.Connection.iterdump().
BEGIN TRANSACTION;
CREATE TABLE access_approved (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    approved_at TEXT NOT NULL,
    via TEXT NOT NULL DEFAULT 'pairing',
    PRIMARY KEY (channel, account_id)
);
INSERT INTO "access_approved" VALUES('telegram','friend','Friend','2026-11-24T02:38:29+00:00','pairing');
CREATE TABLE access_invites (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
INSERT INTO "access_invites" VALUES('9YBW3SFBSQ52SJ4B','telegram','for carol','2026-11-24T02:38:29+00:00','2031-11-23T02:38:29+00:00');
CREATE TABLE access_pairing (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    display_name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    last_reply_at TEXT NOT NULL,
    requests INTEGER NOT NULL DEFAULT 1,
    UNIQUE (channel, account_id)
);
INSERT INTO "access_pairing" VALUES('V9HENGPK','telegram','stranger','Stranger','2026-11-24T02:38:29+00:00','2031-11-23T02:38:29+00:00','2026-11-24T02:38:29+00:00',1);
CREATE TABLE access_pairing_issued (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    issued_at TEXT NOT NULL
);
INSERT INTO "access_pairing_issued" VALUES('telegram','stranger','2026-11-24T02:38:29+00:00');
CREATE TABLE access_pairing_stats (
    channel TEXT PRIMARY KEY,
    refused INTEGER NOT NULL DEFAULT 0,
    evicted INTEGER NOT NULL DEFAULT 0,
    over_quota INTEGER NOT NULL DEFAULT 0,
    since TEXT NOT NULL,
    last_at TEXT NOT NULL
);
CREATE TABLE bg_distill (
    user_id TEXT NOT NULL,
    tier TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    chars INTEGER NOT NULL DEFAULT 0,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    PRIMARY KEY (user_id, tier)
);
INSERT INTO "bg_distill" VALUES('u56e88c5f3eab','short','written','ok',42,'2026-11-24 02:38:29.825347','2026-11-24 02:38:29.825385');
CREATE TABLE bg_retention (
    scope TEXT PRIMARY KEY,
    last_cutoff TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO "bg_retention" VALUES('user:u56e88c5f3eab','2026-01-01 00:00:00.000000','2026-11-24 02:38:29.825417');
CREATE TABLE bg_sleep (
    scope TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL DEFAULT 0,
    last_slot TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE bg_sleep_runs (
    scope TEXT NOT NULL,
    slot TEXT NOT NULL,
    day TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    upto_seq INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    output TEXT NOT NULL DEFAULT '',
    stage TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (scope, slot)
);
INSERT INTO "bg_sleep_runs" VALUES('user:u56e88c5f3eab','2026-03-01T03:00','2026-02-28',1,4,4,'{}','extracted','','2026-11-24 02:38:29.825307','2026-11-24 02:38:29.825307');
CREATE TABLE bg_writer (
    session_id TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO "bg_writer" VALUES('b0d49fae0abd46f68ed8b582f14ea4a9',2,'2026-11-24 02:38:29.825230');
CREATE TABLE compactions (
    session_id TEXT PRIMARY KEY,
    upto_seq INTEGER NOT NULL,
    summary TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO "compactions" VALUES('b0d49fae0abd46f68ed8b582f14ea4a9',2,'they said hello','2026-03-01 09:31:00.000000');
CREATE TABLE conversations (
    conversation_key TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL DEFAULT '',
    persona TEXT NOT NULL DEFAULT 'default',
    last_seen_at TEXT NOT NULL
);
INSERT INTO "conversations" VALUES('websocket:alice','websocket','alice','dm','u56e88c5f3eab','kith','2026-11-24 02:38:29.751127');
INSERT INTO "conversations" VALUES('websocket:bob','websocket','bob','dm','u284d35c4e1c7','kith','2026-11-24 02:38:29.754582');
CREATE TABLE dedupe (
    channel TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (channel, message_id)
);
INSERT INTO "dedupe" VALUES('websocket','m0','2026-11-24 02:38:29.743637');
INSERT INTO "dedupe" VALUES('websocket','m1','2026-11-24 02:38:29.750994');
INSERT INTO "dedupe" VALUES('websocket','m2','2026-11-24 02:38:29.754468');
CREATE TABLE identities (
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES users(user_id),
    display_name TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'auto',
    created_at TEXT NOT NULL,
    PRIMARY KEY (channel, account_id)
);
INSERT INTO "identities" VALUES('websocket','alice','u56e88c5f3eab','Alice','auto','2026-11-24 02:38:29.732894');
INSERT INTO "identities" VALUES('websocket','bob','u284d35c4e1c7','Bob','auto','2026-11-24 02:38:29.751867');
CREATE TABLE kg_facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    subject_key TEXT NOT NULL,
    predicate TEXT NOT NULL,
    object TEXT NOT NULL,
    object_key TEXT NOT NULL,
    valid_from TEXT NOT NULL,
    valid_until TEXT,
    confidence REAL NOT NULL DEFAULT 1.0,
    source_type TEXT NOT NULL DEFAULT '',
    source_ref TEXT NOT NULL DEFAULT '',
    replay_key TEXT UNIQUE,
    created_at TEXT NOT NULL
);
INSERT INTO "kg_facts" VALUES(1,'u56e88c5f3eab','Alice','alice','lives_in','Berlin','berlin','2026-03-01 09:30:00.000000',NULL,1.0,'test','r1','0cc924be2454c935f196de79177f062cd6e8b76bc5ef3b13084710fd7dad91fd','2026-03-01 09:30:00.000000');
INSERT INTO "kg_facts" VALUES(2,'u56e88c5f3eab','Alice','alice','likes','tea','tea','2026-03-01 09:30:00.000000',NULL,1.0,'manual','',NULL,'2026-03-01 09:30:00.000000');
CREATE TABLE kg_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO "kg_meta" VALUES('schema_version','1');
CREATE TABLE link_codes (
    code TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    channel TEXT NOT NULL,
    account_id TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
INSERT INTO "link_codes" VALUES('OLD1','u56e88c5f3eab','websocket','alice','2020-01-01 00:00:00.000000');
CREATE TABLE link_requests (
    code TEXT PRIMARY KEY,
    issuer_user TEXT NOT NULL,
    issuer_channel TEXT NOT NULL,
    issuer_account TEXT NOT NULL,
    issuer_conversation TEXT NOT NULL DEFAULT '',
    issuer_name TEXT NOT NULL DEFAULT '',
    issuer_token TEXT NOT NULL DEFAULT '',
    issuer_ok INTEGER NOT NULL DEFAULT 0,
    redeemer_user TEXT,
    redeemer_channel TEXT,
    redeemer_account TEXT,
    redeemer_conversation TEXT NOT NULL DEFAULT '',
    redeemer_name TEXT NOT NULL DEFAULT '',
    redeemer_token TEXT NOT NULL DEFAULT '',
    redeemer_ok INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
INSERT INTO "link_requests" VALUES('FBHGSSAY','u56e88c5f3eab','websocket','alice','alice','Alice','',0,NULL,NULL,NULL,'','','',0,'2026-11-24 02:38:29.822115','2026-11-24 02:48:29.822115');
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    persona TEXT NOT NULL DEFAULT 'default',
    started_at TEXT NOT NULL,
    last_active_at TEXT NOT NULL,
    ended_at TEXT
);
INSERT INTO "sessions" VALUES('b0d49fae0abd46f68ed8b582f14ea4a9','u56e88c5f3eab','user:u56e88c5f3eab','websocket:alice','kith','2026-03-01 09:30:00.000000','2026-11-24 02:38:29.751060',NULL);
INSERT INTO "sessions" VALUES('43b65e146a83490fbd8b8b347679ab89','u284d35c4e1c7','user:u284d35c4e1c7','websocket:bob','kith','2026-03-01 09:30:00.000000','2026-11-24 02:38:29.754523',NULL);
CREATE TABLE turns (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    channel TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    speaker TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
INSERT INTO "turns" VALUES(1,'e86b67141d934cec9b6aa19809d67a91','b0d49fae0abd46f68ed8b582f14ea4a9','u56e88c5f3eab','user','hello there','websocket','websocket:alice','Alice','2026-03-01 09:30:00.000000');
INSERT INTO "turns" VALUES(2,'e86b67141d934cec9b6aa19809d67a91','b0d49fae0abd46f68ed8b582f14ea4a9','u56e88c5f3eab','assistant','echo: hello there
[sections 4: persona:kith/IDENTITY.md:62, persona:kith/SOUL.md:102, persona:kith/PROTOCOLS.md:135, system:17 | system 316 tok | messages 1 (3 tok)]','websocket','websocket:alice','assistant','2026-11-24 02:38:29.743847');
INSERT INTO "turns" VALUES(3,'92033a520a5c45598f8241e76809c616','b0d49fae0abd46f68ed8b582f14ea4a9','u56e88c5f3eab','user','I live in Berlin','websocket','websocket:alice','Alice','2026-03-01 09:30:00.000000');
INSERT INTO "turns" VALUES(4,'92033a520a5c45598f8241e76809c616','b0d49fae0abd46f68ed8b582f14ea4a9','u56e88c5f3eab','assistant','echo: I live in Berlin
[sections 4: persona:kith/IDENTITY.md:62, persona:kith/SOUL.md:102, persona:kith/PROTOCOLS.md:135, system:17 | system 316 tok | messages 3 (49 tok)]','websocket','websocket:alice','assistant','2026-11-24 02:38:29.751060');
INSERT INTO "turns" VALUES(5,'dd9f14e86fda4bc8ba7988b2bec263fc','43b65e146a83490fbd8b8b347679ab89','u284d35c4e1c7','user','hi from bob','websocket','websocket:bob','Bob','2026-03-01 09:30:00.000000');
INSERT INTO "turns" VALUES(6,'dd9f14e86fda4bc8ba7988b2bec263fc','43b65e146a83490fbd8b8b347679ab89','u284d35c4e1c7','assistant','echo: hi from bob
[sections 4: persona:kith/IDENTITY.md:62, persona:kith/SOUL.md:102, persona:kith/PROTOCOLS.md:135, system:17 | system 316 tok | messages 1 (3 tok)]','websocket','websocket:bob','assistant','2026-11-24 02:38:29.754523');
CREATE TABLE users (
    user_id TEXT PRIMARY KEY,
    display_name TEXT NOT NULL DEFAULT '',
    timezone TEXT NOT NULL DEFAULT 'UTC',
    created_at TEXT NOT NULL
);
INSERT INTO "users" VALUES('u56e88c5f3eab','Alice','Europe/Berlin','2026-11-24 02:38:29.732894');
INSERT INTO "users" VALUES('u284d35c4e1c7','Bob','Europe/Berlin','2026-11-24 02:38:29.751867');
CREATE TABLE watermarks (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
INSERT INTO "watermarks" VALUES('probe',3,'2026-11-24 02:38:29.825473');
CREATE INDEX users_timezone ON users(timezone, user_id);
CREATE INDEX users_created ON users(created_at, user_id);
CREATE INDEX identities_user ON identities(user_id);
CREATE INDEX sessions_scope ON sessions(scope_key, ended_at);
CREATE INDEX turns_session ON turns(session_id, seq);
CREATE INDEX turns_user ON turns(user_id, seq);
CREATE INDEX dedupe_created ON dedupe(created_at);
CREATE INDEX link_requests_issuer ON link_requests(issuer_channel, issuer_account);
CREATE INDEX link_requests_redeemer ON link_requests(redeemer_channel, redeemer_account);
CREATE INDEX kg_facts_subject ON kg_facts(user_id, subject_key, predicate);
CREATE INDEX kg_facts_object ON kg_facts(user_id, object_key);
CREATE INDEX kg_facts_until ON kg_facts(valid_until);
CREATE UNIQUE INDEX kg_facts_open_unique
    ON kg_facts(user_id, subject_key, predicate, object_key) WHERE valid_until IS NULL;
CREATE INDEX access_pairing_issued_account ON access_pairing_issued(channel, account_id);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('turns',6);
INSERT INTO "sqlite_sequence" VALUES('kg_facts',2);
COMMIT;
