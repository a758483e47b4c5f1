-- The console shows why a go channel's events wait: no running Processor of
-- the node has its handler (pgrelay.unhandled_go_channels(), which reads
-- the node-local pgrelay.go_handlers).
GRANT SELECT ON pgrelay.go_handlers TO pgrelay_viewer;
GRANT EXECUTE ON FUNCTION pgrelay.unhandled_go_channels() TO pgrelay_viewer;
