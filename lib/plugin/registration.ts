import type { FastifyInstance, HTTPMethods } from 'fastify'
import { INSTANCE_DECORATORS } from './decorators.js'
import { AlreadyRegisteredError, RouteConflictError } from '../core/errors.js'
import { ENDPOINT_METHODS } from '../transport/endpoint.js'
import type { Settings } from './options.js'

/**
 * What a second registration could collide with, checked before anything is added, so that the error
 * names the option to change instead of Fastify's FST_ERR_DEC_ALREADY_PRESENT or FST_ERR_DUPLICATED_ROUTE.
 * Routes are global to the server (only a register prefix sets them apart), decorators are inherited
 * by child contexts: two instances need sibling contexts and distinct URLs.
 */
export function checkRegistration (fastify: FastifyInstance, settings: Settings): void {
  if (INSTANCE_DECORATORS.some(name => fastify.hasDecorator(name))) throw new AlreadyRegisteredError()
  const routes: Array<{ option: string, path: string, methods: readonly HTTPMethods[] }> = [
    { option: 'path', path: settings.path, methods: ENDPOINT_METHODS }
  ]
  if (settings.metrics !== undefined && settings.metrics.path !== false) {
    routes.push({ option: 'metrics.path', path: settings.metrics.path, methods: ['GET'] })
  }
  for (const { option, path, methods } of routes) {
    const url = fastify.prefix + path
    const taken = methods.find(method => fastify.hasRoute({ method, url }))
    if (taken !== undefined) throw new RouteConflictError(option, `${taken} ${url}`, option)
  }
}
