-- Job env is sealed (encrypted by the coordinator, see coordinator/src/secrets.rs)
-- in its own column; the spec no longer holds it.
ALTER TABLE jobs ADD COLUMN env_sealed TEXT;

-- Finished jobs keep no env. What earlier versions left in plain text goes
-- now; a live job's is sealed by the coordinator when it starts.
UPDATE jobs SET spec = (spec::jsonb - 'env')::text
WHERE state NOT IN ('queued', 'leased', 'running') AND spec::jsonb -> 'env' IS NOT NULL;

-- From now on, whatever ends a job (complete, cancel, expiry) erases its env.
CREATE FUNCTION jobs_erase_env() RETURNS trigger AS $$
BEGIN
    NEW.env_sealed := NULL;
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER jobs_erase_env BEFORE UPDATE OF state ON jobs
FOR EACH ROW WHEN (NEW.env_sealed IS NOT NULL AND NEW.state NOT IN ('queued', 'leased', 'running'))
EXECUTE FUNCTION jobs_erase_env();
