// A channel bot written with telegraf 4.16.3: once it is made an administrator with the post
// right in a channel (my_chat_member), it posts "tick 1" .. "tick 3" on a schedule (every
// 300 ms), each with a "Like" button; a press is answered "liked tick N". Long polling.
//
// Environment: BOT_TOKEN, BOT_API_BASE (see compat.js).
'use strict'

const { Markup } = require('telegraf')
const { makeBot, run } = require('./compat')

const NAME = 'telegraf_channel'
const TICKS = 3

const bot = makeBot(NAME)
const scheduled = new Set()

bot.on('my_chat_member', (ctx) => {
  const u = ctx.update.my_chat_member
  const mayPost = u.chat.type === 'channel' && u.new_chat_member.status === 'administrator' &&
    u.new_chat_member.can_post_messages === true
  if (!mayPost || scheduled.has(u.chat.id)) return
  scheduled.add(u.chat.id)
  let n = 0
  const timer = setInterval(() => {
    n += 1
    if (n >= TICKS) clearInterval(timer)
    const tick = `tick ${n}`
    bot.telegram.sendMessage(u.chat.id, tick, Markup.inlineKeyboard([Markup.button.callback('Like', `like:${n}`)]))
      .catch((err) => console.error(`${NAME}: posting ${tick} failed:`, err))
  }, 300)
})

bot.action(/^like:(\d+)$/, (ctx) => ctx.answerCbQuery(`liked tick ${ctx.match[1]}`))

run(bot, NAME, '/telegraf-channel', ['my_chat_member', 'callback_query', 'channel_post'])
