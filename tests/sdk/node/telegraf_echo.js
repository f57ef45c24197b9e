// Echo bot written with telegraf 4.16.3, long polling against a bot-gateway.
//
// Environment: BOT_TOKEN, BOT_API_BASE (see compat.js).
//
// Replies to a text message with "echo: <text>" and to /start with GREETING. bot.start needs a
// bot_command entity at offset 0, so the command path of the gateway is exercised too.
'use strict'

const { message } = require('telegraf/filters')
const { makeBot, run } = require('./compat')

const NAME = 'telegraf_echo'
const GREETING = 'Hello! I am the telegraf echo bot. Send me any text and I will echo it.'

const bot = makeBot(NAME)
bot.start((ctx) => ctx.reply(GREETING))
bot.on(message('text'), (ctx) => ctx.reply(`echo: ${ctx.message.text}`))

run(bot, NAME, '/telegraf-echo')
