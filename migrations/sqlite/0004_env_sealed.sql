-- Job env is sealed (encrypted by the coordinator, see coordinator/src/secrets.rs)
-- in its own column; the spec no longer holds it.
ALTER TABLE jobs ADD COLUMN env_sealed TEXT;

-- Finished jobs keep no env. What earlier versions left in plain text goes
-- now; a live job's is sealed by the coordinator when it starts.
UPDATE jobs SET spec = json_remove(spec, '$.env')
WHERE state NOT IN ('queued', 'leased', 'running') AND json_extract(spec, '$.env') IS NOT NULL;

-- From now on, whatever ends a job (complete, cancel, expiry) erases its env.
CREATE TRIGGER jobs_erase_env AFTER UPDATE OF state ON jobs
WHEN NEW.env_sealed IS NOT NULL AND NEW.state NOT IN ('queued', 'leased', 'running')
BEGIN
    UPDATE jobs SET env_sealed = NULL WHERE seq = NEW.seq;
END;
