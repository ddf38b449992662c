import Fastify from 'fastify'
import { Type } from 'typebox'
import { Type as Type034, type Static as Static034 } from '@sinclair/typebox'
import { describe, expect, test } from 'tstyche'
import type {
  PromptArgument,
  PromptArguments,
  PromptDefinition,
  ToolArguments,
  ToolDefinition,
  WorkerToolLocation
} from 'fastify-mcp-cancellation'

const app = Fastify()
const ok = { content: [] }
const messages = { messages: [] }

/** What a realistic order-taking tool declares: objects in arrays, enums, a oneOf, defaults, a typed map. */
const orderSchema = {
  type: 'object',
  properties: {
    customer: {
      type: 'object',
      properties: { id: { type: 'string', format: 'uuid' }, email: { type: 'string' } },
      required: ['id'],
      additionalProperties: false
    },
    items: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        properties: {
          sku: { type: 'string' },
          quantity: { type: 'integer', minimum: 1, default: 1 },
          options: { type: 'array', items: { type: 'string', enum: ['gift', 'express'] } }
        },
        required: ['sku']
      }
    },
    payment: {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'card' }, last4: { type: 'string' } }, required: ['kind', 'last4'] },
        { type: 'object', properties: { kind: { const: 'invoice' }, dueDays: { type: 'integer' } }, required: ['kind'] }
      ]
    },
    priority: { enum: ['low', 'normal', 'high'] },
    note: { type: ['string', 'null'] },
    meta: { type: 'object', additionalProperties: { type: 'number' } }
  },
  required: ['customer', 'items', 'payment']
} as const

interface Order {
  customer: { id: string, email?: string }
  items: Array<{ sku: string, quantity?: number, options?: Array<'gift' | 'express'> }>
  payment: { kind: 'card', last4: string } | { kind: 'invoice', dueDays?: number }
  priority?: 'low' | 'normal' | 'high'
  note?: string | null
  meta?: { [key: string]: number }
}

describe('tool arguments from a JSON Schema', () => {
  test('inferred from a schema written as const', () => {
    const schema = {
      type: 'object',
      properties: { ms: { type: 'integer' }, label: { type: 'string', default: 'sleep' } },
      required: ['ms']
    } as const
    app.mcp.tool({
      name: 'sleep',
      inputSchema: schema,
      handler: (args, ctx) => {
        // `default` is not applied (arguments are never rewritten): `label` stays optional.
        expect(args).type.toBe<{ ms: number, label?: string }>()
        expect(ctx.signal).type.toBe<AbortSignal>()
        return ok
      }
    })
    expect<ToolArguments<typeof schema>>().type.toBe<{ ms: number, label?: string }>()
  })

  test('a schema written inline, without as const, keeps its literal types: the same result', () => {
    app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' }, label: { type: 'string', default: 'sleep' } }, required: ['ms'] },
      handler: args => {
        expect(args).type.toBe<{ ms: number, label?: string }>()
        return ok
      }
    })
    app.mcp.tool({
      name: 'order',
      inputSchema: {
        type: 'object',
        properties: {
          customer: {
            type: 'object',
            properties: { id: { type: 'string', format: 'uuid' }, email: { type: 'string' } },
            required: ['id'],
            additionalProperties: false
          },
          items: {
            type: 'array',
            minItems: 1,
            items: {
              type: 'object',
              properties: {
                sku: { type: 'string' },
                quantity: { type: 'integer', minimum: 1, default: 1 },
                options: { type: 'array', items: { type: 'string', enum: ['gift', 'express'] } }
              },
              required: ['sku']
            }
          },
          payment: {
            oneOf: [
              { type: 'object', properties: { kind: { const: 'card' }, last4: { type: 'string' } }, required: ['kind', 'last4'] },
              { type: 'object', properties: { kind: { const: 'invoice' }, dueDays: { type: 'integer' } }, required: ['kind'] }
            ]
          },
          priority: { enum: ['low', 'normal', 'high'] },
          note: { type: ['string', 'null'] },
          meta: { type: 'object', additionalProperties: { type: 'number' } }
        },
        required: ['customer', 'items', 'payment']
      },
      handler: args => {
        expect(args).type.toBe<Order>()
        expect(args).type.toBe<ToolArguments<typeof orderSchema>>()
        return ok
      }
    })
  })

  test('a nested schema: objects in arrays, enums, oneOf', () => {
    app.mcp.tool({
      name: 'order',
      inputSchema: orderSchema,
      handler: args => {
        expect(args).type.toBe<Order>()
        expect(args.items[0]?.options).type.toBe<Array<'gift' | 'express'> | undefined>()
        if (args.payment.kind === 'card') expect(args.payment.last4).type.toBe<string>()
        else expect(args.payment.dueDays).type.toBe<number | undefined>()
        expect(args.meta?.anything).type.toBe<number | undefined>()
        return ok
      }
    })
  })

  test('a property the schema does not declare fails to compile, at any depth', () => {
    app.mcp.tool({
      name: 'order',
      inputSchema: orderSchema,
      handler: args => {
        expect(args).type.not.toHaveProperty('nope')
        expect(args.customer).type.not.toHaveProperty('nope')
        expect<typeof args.items[number]>().type.not.toHaveProperty('nope')
        return ok
      }
    })
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      handler: args => ({ content: [{ type: 'text', text: String(args.nope) }] })
    })).type.toRaiseError("Property 'nope' does not exist on type '{ ms: number; }'")
  })

  test('a property used as the wrong type fails to compile', () => {
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      handler: args => ({ content: [{ type: 'text', text: args.ms.toUpperCase() }] })
    })).type.toRaiseError("Property 'toUpperCase' does not exist on type 'number'")
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } } },
      handler: args => ({ content: [{ type: 'text', text: args.ms.toFixed() }] })
    })).type.toRaiseError("'args.ms' is possibly 'undefined'")
  })

  test('a handler annotated with arguments the schema does not give fails to compile', () => {
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      handler: (args: { ms: string }) => ({ content: [{ type: 'text', text: args.ms }] })
    })).type.toRaiseError("Type 'number' is not assignable to type 'string'")
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      handler: (args: { ms: number }) => ({ content: [{ type: 'text', text: String(args.ms) }] })
    })).type.not.toRaiseError()
  })

  test('a handler with a wrong result fails to compile, naming the result', () => {
    expect(app.mcp.tool({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      handler: args => `${args.ms}`
    })).type.toRaiseError("Type 'string' is not assignable to type 'CallToolResult | Promise<CallToolResult>'")
  })
})

describe('tool arguments from a TypeBox schema', () => {
  test('TypeBox 1.x (typebox)', () => {
    const schema = Type.Object({
      ms: Type.Integer({ minimum: 0 }),
      label: Type.Optional(Type.String()),
      items: Type.Array(Type.Object({ sku: Type.String(), gift: Type.Optional(Type.Boolean()) })),
      priority: Type.Union([Type.Literal('low'), Type.Literal('high')])
    })
    app.mcp.tool({
      name: 'typebox',
      inputSchema: schema,
      outputSchema: Type.Object({ total: Type.Number() }),
      handler: args => {
        expect(args).type.toBe<{ ms: number, label?: string, items: Array<{ sku: string, gift?: boolean }>, priority: 'low' | 'high' }>()
        expect(args).type.not.toHaveProperty('nope')
        return ok
      }
    })
    expect(app.mcp.tool({
      name: 'typebox',
      inputSchema: schema,
      handler: args => ({ content: [{ type: 'text', text: args.ms.toUpperCase() }] })
    })).type.toRaiseError("Property 'toUpperCase' does not exist on type 'number'")
  })

  test('TypeBox 0.34 (@sinclair/typebox): exactly its Static type', () => {
    const schema = Type034.Object({
      ms: Type034.Integer({ minimum: 0 }),
      label: Type034.Optional(Type034.String()),
      items: Type034.Array(Type034.Object({ sku: Type034.String(), gift: Type034.Optional(Type034.Boolean()) })),
      priority: Type034.Union([Type034.Literal('low'), Type034.Literal('high')])
    })
    app.mcp.tool({
      name: 'typebox',
      inputSchema: schema,
      handler: args => {
        expect(args).type.toBe<Static034<typeof schema>>()
        expect(args).type.toBe<{ ms: number, label?: string, items: Array<{ sku: string, gift?: boolean }>, priority: 'low' | 'high' }>()
        expect(args).type.not.toHaveProperty('nope')
        return ok
      }
    })
    expect(app.mcp.tool({
      name: 'typebox',
      inputSchema: schema,
      handler: args => ({ content: [{ type: 'text', text: args.ms.toUpperCase() }] })
    })).type.toRaiseError("Property 'toUpperCase' does not exist on type 'number'")
  })
})

describe('explicit and missing tool arguments', () => {
  test('an explicit type parameter wins, whatever the schema', () => {
    app.mcp.tool<{ ms: number }>({
      name: 'sleep',
      inputSchema: { type: 'object', properties: { seconds: { type: 'string' } } },
      handler: args => {
        expect(args).type.toBe<{ ms: number }>()
        return ok
      }
    })
    app.mcp.tool<{ ms: number }>({
      name: 'sleep',
      inputSchema: Type.Object({ seconds: Type.String() }),
      handler: args => {
        expect(args).type.toBe<{ ms: number }>()
        return ok
      }
    })
  })

  test('a definition typed ToolDefinition<Args> is registered as before', () => {
    const sleepTool: ToolDefinition<{ ms: number, stepMs?: number }> = {
      name: 'sleep',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' }, stepMs: { type: 'integer' } }, required: ['ms'] },
      handler: async ({ ms, stepMs = 50 }) => {
        expect(ms).type.toBe<number>()
        expect(stepMs).type.toBe<number>()
        return ok
      }
    }
    expect(app.mcp.tool(sleepTool)).type.not.toRaiseError()
  })

  test('without an inputSchema, Record<string, unknown>, not any', () => {
    app.mcp.tool({
      name: 'bare',
      handler: args => {
        expect(args).type.toBe<Record<string, unknown>>()
        expect(args).type.not.toBe<any>()
        expect(args.anything).type.toBe<unknown>()
        return ok
      }
    })
    expect(app.mcp.tool({
      name: 'bare',
      handler: args => ({ content: [{ type: 'text', text: args.text.toUpperCase() }] })
    })).type.toRaiseError("'args.text' is of type 'unknown'")
  })

  test('a schema typed widely gives Record<string, unknown>, never any', () => {
    const wide: Record<string, unknown> = { type: 'object' }
    const loose: any = { type: 'object' }
    const object: object = { type: 'object' }
    app.mcp.tool({ name: 'wide', inputSchema: wide, handler: args => { expect(args).type.toBe<Record<string, unknown>>(); return ok } })
    app.mcp.tool({ name: 'loose', inputSchema: loose, handler: args => { expect(args).type.toBe<Record<string, unknown>>(); return ok } })
    app.mcp.tool({ name: 'object', inputSchema: object, handler: args => { expect(args).type.toBe<Record<string, unknown>>(); return ok } })
    expect<ToolArguments<any>>().type.toBe<Record<string, unknown>>()
    expect<ToolArguments<Record<string, unknown>>>().type.toBe<Record<string, unknown>>()
  })

  test('a schema without declared properties gives Record<string, unknown>', () => {
    app.mcp.tool({
      name: 'open',
      inputSchema: { type: 'object' },
      handler: args => {
        expect(args).type.toBe<Record<string, unknown>>()
        return ok
      }
    })
  })

  test('a worker tool has no handler and type-checks as before', () => {
    const worker: WorkerToolLocation = { filename: new URL('file:///workers/spin.js'), name: 'spin' }
    expect(app.mcp.tool({
      name: 'spin',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
      worker
    })).type.not.toRaiseError()
    expect(app.mcp.tool({ name: 'spin', worker })).type.not.toRaiseError()
  })
})

describe('prompt arguments', () => {
  test('inferred from arguments written as const: required ones are string, the others optional', () => {
    const args = [
      { name: 'topic', description: 'What to write about', required: true },
      { name: 'tone', required: false },
      { name: 'length' }
    ] as const
    app.mcp.prompt({
      name: 'essay',
      arguments: args,
      handler: (args, ctx) => {
        expect(args).type.toBe<{ topic: string, tone?: string, length?: string }>()
        expect(ctx.signal).type.toBe<AbortSignal>()
        return messages
      }
    })
    expect<PromptArguments<typeof args>>().type.toBe<{ topic: string, tone?: string, length?: string }>()
  })

  test('inferred from arguments written inline, without as const: the same result', () => {
    app.mcp.prompt({
      name: 'essay',
      arguments: [
        { name: 'topic', description: 'What to write about', required: true },
        { name: 'tone', required: false },
        { name: 'length' }
      ],
      handler: args => {
        expect(args).type.toBe<{ topic: string, tone?: string, length?: string }>()
        return messages
      }
    })
  })

  test('an undeclared argument, or an optional one used as a string, fails to compile', () => {
    expect(app.mcp.prompt({
      name: 'essay',
      arguments: [{ name: 'topic', required: true }],
      handler: args => ({ messages: [{ role: 'user', content: { type: 'text', text: args.nope } }] })
    })).type.toRaiseError("Property 'nope' does not exist on type '{ topic: string; }'")
    expect(app.mcp.prompt({
      name: 'essay',
      arguments: [{ name: 'topic', required: true }, { name: 'tone' }],
      handler: args => ({ messages: [{ role: 'user', content: { type: 'text', text: args.tone.toUpperCase() } }] })
    })).type.toRaiseError("'args.tone' is possibly 'undefined'")
  })

  test('an explicit type parameter wins', () => {
    app.mcp.prompt<{ topic: string, tone: 'formal' | 'casual' }>({
      name: 'essay',
      arguments: [{ name: 'topic', required: true }],
      handler: args => {
        expect(args).type.toBe<{ topic: string, tone: 'formal' | 'casual' }>()
        return messages
      }
    })
  })

  test('without arguments, or with arguments typed widely, Record<string, string>', () => {
    app.mcp.prompt({
      name: 'plain',
      handler: args => {
        expect(args).type.toBe<Record<string, string>>()
        return messages
      }
    })
    const wide: PromptArgument[] = [{ name: 'topic', required: true }]
    app.mcp.prompt({
      name: 'wide',
      arguments: wide,
      handler: args => {
        expect(args).type.toBe<Record<string, string>>()
        return messages
      }
    })
  })

  test('a definition typed PromptDefinition<Args> is registered', () => {
    const essay: PromptDefinition<{ topic: string }> = {
      name: 'essay',
      arguments: [{ name: 'topic', required: true }],
      handler: ({ topic }) => ({ messages: [{ role: 'user', content: { type: 'text', text: topic } }] })
    }
    expect(app.mcp.prompt(essay)).type.not.toRaiseError()
  })
})
