import { InvalidOptionError } from '../core/errors.js'

/** The checks every option's value goes through: one message per kind of value. */

export function flag (name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback
  if (typeof value !== 'boolean') throw new InvalidOptionError(name, 'must be a boolean')
  return value
}

export function positiveInteger (name: string, value: unknown, fallback: number, min = 1): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidOptionError(name, `must be an integer >= ${min}`)
  }
  return value
}
