-- Once, on the database host, as the postgres superuser: sudo -u postgres psql -f setup.sql
-- The gateway's role owns its database and needs no other privilege; it creates its own schema on first start.
CREATE ROLE gateway LOGIN PASSWORD 'change-me';
CREATE DATABASE gateway OWNER gateway;
