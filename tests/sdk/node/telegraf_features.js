// A feature bot written with telegraf 4.16.3: for every text it shows "typing", reacts 👍 to
// the user's message, forwards the message back to the user and copies it back, then replies
// with a "Thanks" button; a press is answered with a notification. When the user reacts to a
// message, the bot (which asked for message_reaction updates) replies to that message.
// Polling, or webhook mode when WEBHOOK_PORT is set: then sendChatAction and
// answerCbQuery travel back as webhook replies (telegraf's default webhookReply).
//
// Environment: BOT_TOKEN, BOT_API_BASE, and for webhook mode WEBHOOK_PORT, WEBHOOK_SECRET
// (see compat.js).
'use strict'

const { Markup } = require('telegraf')
const { message } = require('telegraf/filters')
const { makeBot, run } = require('./compat')

const NAME = 'telegraf_features'

const bot = makeBot(NAME)

bot.on(message('text'), async (ctx) => {
  // First call of the update: in webhook mode it is the webhook reply.
  await ctx.sendChatAction('typing')
  await ctx.react('👍')
  await ctx.forwardMessage(ctx.chat.id)
  await ctx.copyMessage(ctx.chat.id)
  await ctx.reply(`Got: ${ctx.message.text}`, {
    reply_parameters: { message_id: ctx.message.message_id },
    ...Markup.inlineKeyboard([Markup.button.callback('Thanks', 'thanks')])
  })
})

bot.action('thanks', (ctx) => ctx.answerCbQuery('You are welcome!'))

bot.on('message_reaction', async (ctx) => {
  const r = ctx.update.message_reaction
  const emoji = r.new_reaction.map((x) => x.emoji).join('') || 'nothing'
  await ctx.telegram.sendMessage(r.chat.id, `You reacted ${emoji}`, {
    reply_parameters: { message_id: r.message_id }
  })
})

run(bot, NAME, '/telegraf-features', ['message', 'callback_query', 'message_reaction'])
