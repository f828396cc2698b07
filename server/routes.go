package server

// routes lists the whole API at a glance.
func (s *Server) routes() {
	r := s.router
	r.Use(s.trace, s.readBody, s.limitInFlight, s.recoverer, s.accessLog)
	r.NoRoute(s.notFound)
	r.NoMethod(s.methodNotAllowed)

	client := r.Group("/v1", s.apiKeys)
	client.GET("/infractions", s.infractions)
	client.GET("/sources", s.coverage)
	client.GET("/sources/:source/infractions/:infraction_id/voucher", s.voucher)
	client.POST("/queries", s.createQuery)
	client.GET("/queries/:qid", s.getQuery)
	client.POST("/watches", s.createWatch)
	client.GET("/watches", s.listWatches)
	client.GET("/watches/:wid", s.getWatch)
	client.DELETE("/watches/:wid", s.deleteWatch)

	admin := r.Group("/v1/admin", s.adminAuth)
	admin.GET("/breakers", s.listBreakers)
	admin.POST("/breakers/:key/:operation/reset", s.resetBreaker)
	admin.POST("/breakers/:key/:operation/open", s.openBreaker)
	admin.PUT("/sources/:id/breaker", s.updateBreaker)
	admin.GET("/events", s.events)
	admin.GET("/sources", s.adminSources)
	admin.GET("/history", s.history)
	admin.GET("/dlq", s.listDLQ)
	admin.POST("/dlq/:id/redeliver", s.redeliverDLQ)
	admin.DELETE("/dlq/:id", s.deleteDLQ)
	admin.GET("/readyz", s.adminReadyz)
	admin.DELETE("/memory", s.forgetMemory)
	admin.GET("/watches", s.watchStats)

	// Runtime profiles for operators (pprof.go): the admin token, like
	// /v1/admin, and not counted toward max_in_flight (overload.go).
	debug := r.Group(pprofPrefix, s.adminAuth)
	debug.GET("", s.pprofIndex)
	debug.GET("/", s.pprofIndex) // where net/http/pprof has its index
	debug.GET("/:profile", s.pprofProfile)

	r.GET("/problems/:slug", s.problemPage)
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.unlessDraining, s.readyz)
	r.GET("/openapi.yaml", s.openapi)
	r.GET("/metrics", s.metrics)
	r.GET("/", s.dashboard)
}
