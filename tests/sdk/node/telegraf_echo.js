// Echo bot written with telegraf 4.16.3, long polling against a bot-gateway.
//
// Environment:
//   BOT_TOKEN     the bot token
//   BOT_API_BASE  the gateway's Bot API listener, e.g. http://127.0.0.1:8081
//
// Replies to a text message with "echo: <text>" and to /start with GREETING. bot.start needs a
// bot_command entity at offset 0, so the command path of the gateway is exercised too.
'use strict'

const { Telegraf } = require('telegraf')
const { message } = require('telegraf/filters')

const GREETING = 'Hello! I am the telegraf echo bot. Send me any text and I will echo it.'

const token = process.env.BOT_TOKEN
const base = process.env.BOT_API_BASE
if (!token || !base) {
  console.error('telegraf_echo: set BOT_TOKEN and BOT_API_BASE')
  process.exit(2)
}

// telegraf resolves './bot<token>/<method>' against apiRoot as a URL, which drops the last path
// segment unless apiRoot ends with '/' (SDK-COMPAT §1); a trailing slash keeps any prefix.
const apiRoot = base.endsWith('/') ? base : base + '/'
const bot = new Telegraf(token, { telegram: { apiRoot } })

bot.start((ctx) => ctx.reply(GREETING))
bot.on(message('text'), (ctx) => ctx.reply(`echo: ${ctx.message.text}`))
// Without a catch, an error in a handler ends polling; log it and keep serving.
bot.catch((err, ctx) => {
  console.error(`telegraf_echo: handler error for update ${ctx.update.update_id}:`, err)
})

bot.launch().catch((err) => {
  console.error('telegraf_echo: polling stopped:', err)
  process.exit(1)
})
// launch() resolves only when polling ends (SDK-COMPAT §4), so this logs before the first poll.
console.error('telegraf_echo: starting: getMe, deleteWebhook, then long polling')

process.once('SIGINT', () => bot.stop('SIGINT'))
process.once('SIGTERM', () => bot.stop('SIGTERM'))
