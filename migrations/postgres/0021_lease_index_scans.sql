-- Issue 29: drover_lease reads the queue and each runner's live leases
-- through partial indexes (queued jobs; leased and running ones). A job
-- that leaves those states leaves its entry behind until VACUUM: after a
-- drain, thousands. The function's plans are generic, made once per
-- connection from whatever the statistics said then, and they varied: the
-- count of a runner's leases ran as a bitmap scan or a sequential scan, and
-- either fetched every dead entry's row on every lease (0.48-0.8 ms a lease
-- after 5,000 jobs by one runner, growing with the drain). A plain index
-- scan marks each entry it finds dead (LP_DEAD) and the next scan skips it:
-- the same count in 0.02 ms. Every statement in the function has an index
-- to read by (0014's rule); these settings make the planner keep to them.
ALTER FUNCTION drover_lease(TEXT[], TEXT[], TEXT[], BIGINT, BIGINT) SET enable_bitmapscan = off;
ALTER FUNCTION drover_lease(TEXT[], TEXT[], TEXT[], BIGINT, BIGINT) SET enable_seqscan = off;
